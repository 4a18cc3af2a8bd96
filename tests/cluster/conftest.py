"""The cluster tier: jobs through ``hydra/launcher=slurm`` on a real Slurm.

Tests marked ``cluster`` need a Slurm that answers ``sinfo`` and ``sacct`` (accounting: submitit
polls it), and root, as ``make test-cluster`` provides: it starts a one-node Slurm on this
machine with ``tools/local_slurm.sh``, runs ``pytest -m cluster tests/cluster``, then stops it.
Otherwise (another selection, no root, no Slurm) they are skipped with one reason. The
unmarked tests here (launcher configs, the request check) need no Slurm and run with the fast
suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster.runs import bench_environment

START_HINT = "`make test-cluster` (as root, on Debian) starts one with tools/local_slurm.sh"
SLURM_QUERY_TIMEOUT_S = 15


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "cluster: needs a running Slurm and root (`make test-cluster` starts one)")


def slurm_unavailable() -> str | None:
    """Why the cluster tier cannot run here, or None when Slurm answers."""
    if os.geteuid() != 0:
        return f"the cluster tier needs root; {START_HINT}"
    conf = os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    if shutil.which("sinfo") is None or not Path(conf).is_file():
        return f"no Slurm configured here (sinfo, {conf}); {START_HINT}"
    for command in (["sinfo", "-h"], ["sacct", "-n", "-X"]):
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=SLURM_QUERY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"Slurm does not answer {command[0]} (SLURM_CONF={conf}); {START_HINT}"
        if done.returncode != 0:
            return (f"Slurm does not answer {command[0]} (SLURM_CONF={conf}: "
                    f"{done.stderr.strip()[-200:]}); {START_HINT}")
    return None


@pytest.fixture(scope="session")
def slurm(request) -> None:
    """Skips the test, with the reason, unless the tier was asked for (``-m cluster``: minutes
    of Slurm jobs never join the fast suite by accident) and a Slurm with accounting answers."""
    if "cluster" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the cluster tier runs when selected: `make test-cluster` (pytest -m cluster)")
    reason = slurm_unavailable()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def bench_env(data_root) -> dict[str, str]:
    """The environment of a submitting command (:func:`tests.cluster.runs.bench_environment`)."""
    return bench_environment(data_root)
