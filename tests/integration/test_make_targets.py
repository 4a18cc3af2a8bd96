"""The Makefile's reproduce targets come from the registry: dry runs and ``list-reproduce``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from bench.reporting.catalog import make_target
from bench.reporting.registry import implemented_artifacts
from tests.helpers import REPO

MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def make(*args: str) -> list[str]:
    """stdout lines of ``make <args>`` in the repository (outer make's flags cleared)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    proc = subprocess.run([MAKE, "--no-print-directory", "-C", str(REPO), *args], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


# The README's main job runs in the pinned arithmetic (its committed report is what another
# x86-64 machine gets back); every other target keeps the native kernels.
PINNED = {"reproduce-table-2": " --pinned-arithmetic"}


@pytest.mark.second_tier  # make in a subprocess
@pytest.mark.parametrize("target, artifact", [
    ("reproduce-table-2", "ssla/table-2"),
    ("reproduce-subnet-figure-1", "subnet/figure-1"),
])
def test_dry_run_prints_the_reproduce_line(target, artifact):
    pinned = PINNED.get(target, "")
    assert make("-n", target, "SCALE=cpu", f"PY={sys.executable}") == [
        f"{sys.executable} -m bench.reproduce {artifact} --scale cpu{pinned}"]
    # Without PY the project's own .venv is used (and installed first when missing).
    lines = make("-n", target, "SCALE=smoke", "VENV=.venv")
    assert lines[-1] == f".venv/bin/python -m bench.reproduce {artifact} --scale smoke{pinned}"


@pytest.mark.second_tier  # make in a subprocess, once per target
def test_every_artifact_target_and_short_form_reproduces_its_own_artifact():
    for key, spec in implemented_artifacts().items():
        for target in {f"reproduce-{spec.paper}-{spec.artifact}",
                       make_target(spec.paper, spec.artifact)}:
            assert make("-n", target, "SCALE=smoke", f"PY={sys.executable}") == [
                f"{sys.executable} -m bench.reproduce {key} --scale smoke"
                f"{PINNED.get(target, '')}"], target


@pytest.mark.second_tier
def test_list_reproduce_lists_every_artifact():
    listed = {line.split()[0] for line in make("list-reproduce", f"PY={sys.executable}")}
    assert listed == {f"reproduce-{spec.paper}-{spec.artifact}"
                      for spec in implemented_artifacts().values()}
