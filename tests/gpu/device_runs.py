"""The GPU tier's runs: every implemented artifact's experiment (and each side-run config) at
smoke scale through ``python -m bench.reproduce``, once on the CPU and once on the tier's
device, into separate results folders, at the same time.

The tier's device is ``cuda`` unless ``BENCH_GPU_TIER_DEVICE`` names another; that variable
exists for one purpose: ``BENCH_GPU_TIER_DEVICE=cpu`` runs the whole path (data root, both
runs, pairing, comparison) on a machine without a GPU, as a self-check of the tier itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness.records import iter_records
from bench.reporting.registry import implemented_artifacts, results_experiment, side_run_configs
from tests.gpu.data_root import DataRoot
from tests.helpers import REPO

DEVICE_ENV = "BENCH_GPU_TIER_DEVICE"
REFERENCE_DEVICE = "cpu"
SCALE = "smoke"
# One run of the slowest smoke experiment takes minutes on a 2-core CPU; an hour means hung.
RUN_TIMEOUT_S = 3600
LOG_TAIL_LINES = 25
# The return code a run is given when the tier stopped it at the timeout.
TIMED_OUT = 124


def tier_device() -> str:
    """The device the tier compares with the CPU: ``$BENCH_GPU_TIER_DEVICE``, else ``cuda``."""
    return os.environ.get(DEVICE_ENV) or "cuda"


def missing_device_reason(device: str | None = None) -> str | None:
    """Why the tier cannot run here (one line), or None when it can."""
    device = device or tier_device()
    if not device.startswith("cuda"):
        return None
    import torch

    if torch.cuda.is_available():
        return None
    return (f"the GPU tier needs a CUDA device (device={device}, torch.cuda.is_available() is "
            f"False); {DEVICE_ENV}=cpu runs its path on the CPU as a self-check")


@dataclass(frozen=True)
class TierRun:
    """One ``bench.reproduce`` target: an experiment config and the results folder (experiment
    name) its records go to; ``side_run_of`` names the experiment a side-run config adds to."""

    config: str
    experiment: str
    side_run_of: str | None = None

    def __str__(self) -> str:
        return self.config


def tier_runs() -> list[TierRun]:
    """Every implemented artifact's experiment once (artifacts drawn from another's records
    share its run), each followed by its side-run configs, in registry order."""
    runs: list[TierRun] = []
    seen: set[str] = set()
    for spec in implemented_artifacts().values():
        if spec.experiment in seen:
            continue
        seen.add(spec.experiment)
        runs.append(TierRun(spec.experiment, spec.experiment))
        runs += [TierRun(side, results_experiment(side), spec.experiment)
                 for side in side_run_configs(spec.experiment)]
    return runs


def reproduce_command(run: TierRun, results_dir: Path, device: str) -> list[str]:
    """``python -m bench.reproduce <config> --scale smoke ...`` for one device; side runs are
    their own tier runs, so every run leaves them out."""
    return [sys.executable, "-m", "bench.reproduce", run.config, "--scale", SCALE, "--no-report",
            "--no-side-runs", "--workers", "1", f"results_dir={results_dir}", f"device={device}"]


def run_environment(data: DataRoot, device: str) -> dict[str, str]:
    """The environment of one run: the tier's data root; torch threads shared out between the
    two runs of each test and the pytest-xdist workers (unless OMP_NUM_THREADS is set); TF32
    off on a GPU (a precision choice, not a port error: see record_comparison.FLOAT)."""
    env = {**os.environ, **data.environment(), "PYTHONPATH": str(REPO)}
    env.pop("BENCH_RESULTS_DIR", None)
    if "OMP_NUM_THREADS" not in env:
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        env["OMP_NUM_THREADS"] = str(max(1, cores // (2 * workers)))
    if device.startswith("cuda"):
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    return env


@dataclass
class RunOutcome:
    """One finished run: where its records and log are, its exit status and wall seconds."""

    device: str
    results_dir: Path
    log: Path
    returncode: int
    seconds: float

    def log_tail(self) -> str:
        """The last lines of the run's output."""
        lines = self.log.read_text(errors="replace").splitlines()
        return "\n".join(lines[-LOG_TAIL_LINES:])

    def records(self, experiment: str) -> list[dict[str, Any]]:
        """The run's records of ``experiment`` at smoke scale."""
        return list(iter_records(self.results_dir, experiment, SCALE))


def run_pair(run: TierRun, data: DataRoot, folder: Path, device: str,
             timeout_s: float = RUN_TIMEOUT_S) -> tuple[RunOutcome, RunOutcome]:
    """Run ``run`` on the CPU (``folder/reference-cpu``) and on ``device``
    (``folder/candidate-<device>``) at the same time; each run's output goes to a ``.log``
    beside its results. Both are stopped when either passes ``timeout_s``."""
    folder.mkdir(parents=True, exist_ok=True)
    started = []
    for label, on in (("reference", REFERENCE_DEVICE), ("candidate", device)):
        results_dir = folder / f"{label}-{on.replace(':', '-')}"
        log = results_dir.with_suffix(".log")
        with open(log, "w") as handle:
            process = subprocess.Popen(reproduce_command(run, results_dir, on), cwd=REPO,
                                       env=run_environment(data, on), stdout=handle,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        started.append((on, results_dir, log, process, time.perf_counter()))
    deadline = time.monotonic() + timeout_s
    stopped: set[int] = set()
    outcomes = []
    for on, results_dir, log, process, t0 in started:
        try:
            code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for running in (entry[3] for entry in started):
                if running.poll() is None:
                    os.killpg(running.pid, signal.SIGTERM)
                    stopped.add(running.pid)
            code = process.wait()
        outcomes.append(RunOutcome(on, results_dir, log,
                                   TIMED_OUT if process.pid in stopped else code,
                                   time.perf_counter() - t0))
    return outcomes[0], outcomes[1]
