"""Running bench commands against Slurm and reading what they leave behind (cluster tier)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import REPO

# Seconds one bench command may take before the test fails instead of hanging.
COMMAND_TIMEOUT_S = 900
# Record keys that must agree between two runs of one job (timings, host, timestamps, paths,
# versions and the resolved config's results_dir are allowed to differ).
OUTCOME_KEYS = ("status", "experiment", "scale", "seed", "protocol", "dataset", "method",
                "variant", "config_hash", "cells", "failed_cells", "metrics", "fitted", "arrays",
                "error")
JOB_ID = re.compile(r"\d+(_\d+)?")
UNFINISHED = ("PENDING", "RUNNING", "REQUEUED", "COMPLETING")


def bench_environment(data_root: str) -> dict[str, str]:
    """The environment of a submitting command: the test's data root, one CPU and one thread
    per job (the tier shares the machine), no site Slurm settings of the caller's."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("BENCH_SLURM_")}
    env.update(BENCH_DATA_DIR=data_root, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1",
               BENCH_SLURM_CPUS="1", BENCH_SLURM_MEM_GB="2")
    return env


def run_bench(args: list[str], env: dict[str, str], module: str = "bench.run",
              timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
    """``python -m <module> <args>`` from the repository root, its output captured."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def bench_command(args: list[str], module: str = "bench.run") -> list[str]:
    """The argv of ``python -m <module> <args>``."""
    return [sys.executable, "-m", module, *args]


def records(results_dir: Path) -> dict[str, dict]:
    """The records under ``results_dir`` by config hash."""
    found = (json.loads(path.read_text()) for path in results_dir.rglob("record.json"))
    return {record["config_hash"]: record for record in found}


def outcome(record: dict) -> dict:
    """What a run computed and how it ended, without when, where and how long."""
    return {key: record.get(key) for key in OUTCOME_KEYS}


def submissions(results_dir: Path) -> list[Path]:
    """The per-submission submitit folders of the multiruns into ``results_dir``, oldest first."""
    root = results_dir / ".hydra" / "multirun" / ".submitit"
    return sorted(path for path in root.glob("*") if path.is_dir()) if root.is_dir() else []


def job_ids(submission: Path) -> list[str]:
    """Slurm ids of the jobs (``123``, or array tasks ``123_0``) of one submission folder that
    ran (left a log)."""
    return sorted(path.name for path in submission.iterdir()
                  if path.is_dir() and JOB_ID.fullmatch(path.name) and any(path.glob("*_log.*")))


def job_logs(submission: Path) -> str:
    """The jobs' standard output and error (submitit's logs) of one submission, concatenated."""
    return "\n".join(path.read_text(errors="replace")
                     for path in sorted(submission.rglob("*_log.*")))


def sacct_states(job_id: str, timeout: float = 60) -> list[str]:
    """Every state ``sacct`` holds for a job, one per attempt (requeues are kept apart), once
    the last attempt's end has reached the accounting database."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(["sacct", "-n", "-X", "-D", "-P", "-j", job_id, "-o", "State"],
                              capture_output=True, text=True, check=True)
        states = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
        if (states and states[-1] not in UNFINISHED) or time.monotonic() > deadline:
            return states
        time.sleep(1)


def lenet_training(epochs: int, train_images: int = 512, batch_size: int = 8) -> list[str]:
    """Overrides of one generalized_laplace/figure-3 smoke job (Diag posterior) whose stored
    LeNet-5 trains for ``epochs`` epochs on ``train_images`` MNIST images, checkpointing after
    every epoch (an interrupted or requeued job resumes from the last one)."""
    stage = f"{{epochs:{epochs},lr:1.0e-3,batch_size:{batch_size},optimizer:adam}}"
    return ["experiment=generalized_laplace/figure-3", "scale=smoke", "seed=0", "posterior=Diag",
            f"dataset.n_train={train_images}", f"network.stages=[{stage}]"]


def epoch_seconds(results_dir: Path) -> float:
    """Median seconds per epoch (the first left out) of the networks trained in ``results_dir``."""
    seconds = sorted(epoch["seconds"] for path in results_dir.rglob("history.json")
                     for epoch in json.loads(path.read_text())["epochs"][1:])
    return seconds[len(seconds) // 2]
