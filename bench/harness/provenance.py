"""Package versions, git state and the machine's load stored in every run record."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

from bench.harness.arithmetic import arithmetic_mode

# Every installed package that can move a number in a record: the array and linear-algebra
# stack, the curvature backends behind laplace-torch, the training loop, the baselines, the
# data splitting and tuning code, the config engine, and the CUDA libraries torch calls on GPU.
TRACKED_PACKAGES = (
    "torch", "numpy", "scipy", "pandas", "scikit-learn", "torchvision", "opt-einsum",
    "nvidia-cublas", "nvidia-cudnn-cu13",
    "laplace-torch", "curvlinops-for-pytorch", "backpack-for-pytorch", "asdfghjkl",
    "lightning", "pytorch-lightning", "lightning-uq-box", "pyro-ppl", "optuna",
    "hydra-core", "omegaconf", "bayesian-torch", "laplace-bench",
)


def package_versions() -> dict[str, str]:
    """Installed versions of the packages whose behaviour can change a result, and the vector
    instruction set torch's CPU kernels dispatch to (``torch_cpu_capability``: AVX2 and AVX512
    kernels round differently, and a long stochastic training such as the VI baselines' ends
    in different weights; ``ATEN_CPU_CAPABILITY=avx2`` selects the AVX2 kernels), the CPU's
    name, and whether the process computed in the pinned arithmetic every x86-64 CPU shares
    (``arithmetic``: ``pinned`` or ``native``, :mod:`bench.harness.arithmetic`)."""
    versions = {"python": platform.python_version(),
                "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
                "cpu": cpu_model(), "arithmetic": arithmetic_mode()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; the platform's processor string elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_state(repo: Path | None = None) -> dict[str, object]:
    """HEAD sha and whether the work tree has uncommitted changes ("unknown" outside git)."""
    cwd = repo or Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_sha": sha or "unknown", "git_dirty": bool(status) if status is not None else None}


def machine_load() -> dict[str, float | int | None]:
    """What shares the cores a job's times were measured on: the cores this process may use,
    its torch threads and the 1-minute load average (runnable processes; None where the
    platform has none, so the timing page says "not recorded" rather than "quiet"). A load
    above the cores means jobs waited for a core, so their wall times overstate what the work
    costs on quiet cores; their ``cpu_s`` does not."""
    try:
        load = round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        load = None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cores": int(cores or 1), "torch_threads": torch.get_num_threads(), "load_1m": load}
