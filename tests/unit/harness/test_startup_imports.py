"""A job's start-up imports no heavy library it does not use (issue 27, start-up).

The command line, the job runner and the method contract are imported by every job; the
libraries below cost 0.4-2.5 s each to import and are needed only by some experiments, so they
are imported where they are used.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO

HEAVY = ("torchvision", "scipy", "pandas", "lightning", "pyro", "laplace", "matplotlib",
         "transformers", "optuna", "wilds")
STARTUP = ("bench.cli.run_command", "bench.harness.job_execution", "bench.contracts.method",
           "bench.contracts.capabilities", "bench.harness.task_inputs")


@pytest.mark.second_tier
def test_the_job_start_up_imports_no_heavy_library():
    probe = (f"import sys\nfor m in {STARTUP!r}: __import__(m)\n"
             f"print(sorted(h for h in {HEAVY!r} if h in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
