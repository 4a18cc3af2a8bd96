"""The pinned arithmetic: which variables it sets, and when a process computes in it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.harness import arithmetic
from bench.harness.arithmetic import PINNED_ARITHMETIC, pinned_environment, unpinned_because
from tests.helpers import REPO


def test_the_pinned_environment_overrides_the_callers_kernel_choices():
    native = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AUTO", "HOME": "/root"}
    pinned = pinned_environment(native)
    assert pinned["ATEN_CPU_CAPABILITY"] == "default" and pinned["MKL_CBWR"] == "COMPATIBLE"
    assert pinned["HOME"] == "/root" and pinned["OMP_NUM_THREADS"] == "1"
    assert not any(" " in value for value in PINNED_ARITHMETIC.values())


def test_a_process_is_pinned_only_with_every_variable_and_the_start_up_ones_from_its_start(
        monkeypatch):
    monkeypatch.setattr(arithmetic.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(arithmetic, "_start_environment", lambda: dict(PINNED_ARITHMETIC))
    for name, value in PINNED_ARITHMETIC.items():
        monkeypatch.setenv(name, value)
    assert unpinned_because() is None

    monkeypatch.setenv("MKL_CBWR", "AVX2")
    assert unpinned_because() == "MKL_CBWR not set to the pinned value"
    monkeypatch.setenv("MKL_CBWR", PINNED_ARITHMETIC["MKL_CBWR"])

    monkeypatch.setattr(arithmetic, "_start_environment", lambda: {})
    assert unpinned_because() == ("GLIBC_TUNABLES set after the process started "
                                  "(read at start-up only)")

    monkeypatch.setattr(arithmetic.platform, "machine", lambda: "aarch64")
    assert unpinned_because().startswith("a aarch64 CPU")


@pytest.mark.second_tier  # three interpreters started as command lines
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/environ")
def test_a_command_started_in_the_printed_environment_is_pinned_and_one_started_without_is_not():
    assignments = subprocess.run([sys.executable, "-m", "bench.harness.arithmetic"], cwd=REPO,
                                 capture_output=True, text=True, check=True).stdout.split()
    native = {name: value for name, value in os.environ.items()
              if name not in PINNED_ARITHMETIC}
    script = "from bench.harness.arithmetic import arithmetic_mode; print(arithmetic_mode())"
    modes = [subprocess.run(["env", *start, sys.executable, "-c", script], cwd=REPO, env=native,
                            capture_output=True, text=True, check=True).stdout.strip()
             for start in (assignments, [])]
    assert modes == (["pinned", "native"] if arithmetic.is_x86_64() else ["native", "native"])


def test_nothing_is_pinned_on_another_processor(monkeypatch):
    """Its variables name x86 features that an Arm build of numpy or glibc does not know."""
    monkeypatch.setattr(arithmetic.platform, "machine", lambda: "aarch64")
    for name in PINNED_ARITHMETIC:
        monkeypatch.delenv(name, raising=False)
    arithmetic.pin_arithmetic()
    assert not any(name in os.environ for name in PINNED_ARITHMETIC)
