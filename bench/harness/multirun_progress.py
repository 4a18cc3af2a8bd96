"""Hydra callbacks of a multirun, registered in ``conf/config.yaml``.

:class:`MultirunProgress` logs a progress line after every job: ``[k/N] done, failed, elapsed,
ETA``. The total N is the size of the cartesian product of the multirun's sweep overrides; a
job counts as failed when its record says so (the job function returns the record's status) or
when it raised.

:class:`SlurmRequestCheck` stops a multirun on the Slurm launchers with one line, before
anything is submitted, when no node of the partition can hold one job (more CPUs, memory or
GPUs asked for than any node has: sbatch would refuse it with a long traceback, or the array
would pend for ever) or when Slurm does not answer.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from bench.harness.progress import clock

logger = logging.getLogger("bench.multirun")


def sweep_size(overrides: list[str]) -> int:
    """Number of jobs a list of Hydra multirun overrides expands to (a ``glob(...)`` of a
    config group counts the group's options it matches)."""
    from bench.harness.overrides import group_options, sweep_values

    groups = group_options()
    size = 1
    for override in OverridesParser.create().parse_overrides(overrides):
        if override.is_sweep_override():
            size *= len(sweep_values(override, groups))
    return size


def progress_line(done: int, failed: int, skipped: int, total: int, elapsed: float) -> str:
    """The line logged after each job (ETA from the mean time of the jobs so far)."""
    finished = done + failed
    remaining = max(total - finished, 0)
    eta = elapsed / finished * remaining if finished else math.inf
    skipped_text = f" ({skipped} skipped)" if skipped else ""
    return (f"[{finished}/{total}] {done} done{skipped_text}, {failed} failed, "
            f"elapsed {clock(elapsed)}, ETA {clock(eta)}")


class MultirunProgress(Callback):
    """Counts finished jobs of a multirun and logs the progress line after each."""

    def __init__(self) -> None:
        self.total = 0
        self.done = self.failed = self.skipped = 0
        self.started = time.perf_counter()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Size the multirun from its sweep overrides and start the clock."""
        self.total = sweep_size(list(config.hydra.overrides.task))
        self.done = self.failed = self.skipped = 0
        self.started = time.perf_counter()

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        """Count the job by its record's status and log the progress line (not inside a job
        that a submitit launcher runs in its own process: there it would count that job
        alone, ``[1/N]`` in every job)."""
        if not self.total or os.environ.get("SUBMITIT_EXECUTOR"):
            return
        try:
            status = job_return.return_value
        except Exception:  # noqa: BLE001 - the job raised: its exception is re-raised by Hydra
            status = "failed"
        if status == "failed":
            self.failed += 1
        else:
            self.done += 1
            self.skipped += status == "skipped"
        elapsed = time.perf_counter() - self.started
        logger.info(progress_line(self.done, self.failed, self.skipped, self.total, elapsed))


SLURM_LAUNCHERS = (
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
    "hydra_plugins.bench_launcher.reporting_slurm_launcher.ReportingSlurmLauncher")
SINFO_TIMEOUT_S = 30
# sinfo's short node states (%t) on which no job starts.
UNUSABLE_STATES = ("down", "drain", "drng", "drained", "fail", "maint", "inval", "unk")


@dataclass(frozen=True)
class SlurmNode:
    """One node of one partition as ``sinfo`` lists it (memory in MB)."""

    partition: str
    default: bool
    cpus: int
    memory_mb: int
    gpus: int
    state: str = "idle"
    partition_state: str = "up"

    @property
    def usable(self) -> bool:
        """Whether Slurm would start jobs on it: its partition up, the node not down, drained,
        draining or failing."""
        return (self.partition_state == "up"
                and not self.state.rstrip("*~#!%$@^-").startswith(UNUSABLE_STATES))


def gres_gpus(gres: str) -> int:
    """GPUs in a ``sinfo`` gres field (``gpu:4``, ``gpu:a100:2(S:0-1),shard:8``, ``(null)``)."""
    return sum(int(count) for count in re.findall(r"(?:^|,)gpu(?::[^:(),]+)?:(\d+)", gres))


def parse_sinfo(text: str) -> list[SlurmNode]:
    """Nodes from ``sinfo -h -N -o '%P|%c|%m|%G|%t|%a'`` output (the default partition ends in
    *; without the node state field a node counts as idle, without the partition's
    availability its partition as up)."""
    nodes = []
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) not in (4, 5, 6):
            continue
        partition, cpus, memory, gres = fields[:4]
        state = fields[4] if len(fields) >= 5 else "idle"
        available = fields[5].strip().lower() if len(fields) == 6 else "up"
        nodes.append(SlurmNode(partition.rstrip("*"), partition.endswith("*"),
                               int(re.sub(r"\D.*", "", cpus) or 0),
                               int(re.sub(r"\D.*", "", memory) or 0), gres_gpus(gres), state,
                               available))
    return nodes


def slurm_nodes() -> tuple[list[SlurmNode] | None, str | None]:
    """``(nodes, None)`` from ``sinfo``, or ``(None, why)`` when Slurm cannot be asked."""
    if shutil.which("sinfo") is None:
        return None, "Slurm's commands (sinfo, sbatch) are not on PATH on this machine"
    try:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%P|%c|%m|%G|%t|%a"],
                              capture_output=True, text=True, timeout=SINFO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"Slurm does not answer (sinfo ran for {SINFO_TIMEOUT_S}s)"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return None, f"Slurm does not answer ({said})"
    return parse_sinfo(done.stdout), None


def _count(value: Any, default: int = 0) -> int:
    return default if value is None else int(value)


def request_problem(launcher: Any, nodes: list[SlurmNode], name: str) -> str | None:
    """Why no node of the launcher's partition can run one job it asks for, else None.

    ``launcher`` is the ``hydra.launcher`` node, ``name`` its ``hydra/launcher`` choice (for
    the message); the partition ``null`` means the cluster's default partition.
    """
    partition = launcher.get("partition")
    if partition:
        wanted = set(str(partition).split(","))
        candidates = [node for node in nodes if node.partition in wanted]
        where = f"partition {partition}"
    else:
        candidates = [node for node in nodes if node.default] or nodes
        where = "the default partition"
    if not candidates:
        known = ", ".join(sorted({node.partition for node in nodes})) or "(none)"
        return (f"Slurm has no node in {where}; set BENCH_SLURM_PARTITION "
                f"(hydra.launcher.partition) to one of: {known}")
    if not any(node.partition_state == "up" for node in candidates):
        states = ", ".join(sorted({node.partition_state for node in candidates}))
        return (f"{where} is not up (sinfo availability: {states}): jobs would pend or be "
                "refused until an administrator sets it up; choose another partition "
                "(BENCH_SLURM_PARTITION)")
    if not any(node.usable for node in candidates):
        states = ", ".join(sorted({node.state for node in candidates}))
        return (f"every node of {where} is down or drained (sinfo states: {states}): jobs "
                "would pend until an administrator resumes one; choose another partition "
                "(BENCH_SLURM_PARTITION)")
    candidates = [node for node in candidates if node.usable]
    tasks = _count(launcher.get("tasks_per_node"), 1)
    cpus = _count(launcher.get("cpus_per_task"), 1) * tasks
    memory_gb = _count(launcher.get("mem_gb"))
    gpus = requested_gpus(launcher)
    most_gpus = max(node.gpus for node in candidates)
    most_cpus = max(node.cpus for node in candidates)
    most_memory_gb = max(node.memory_mb for node in candidates) / 1024
    asks = f"hydra/launcher={name} asks for"
    if gpus > most_gpus:
        has = (f"the largest node of {where} has {most_gpus}" if most_gpus
               else f"no node of {where} has one (no gpu in sinfo's gres)")
        return (f"{asks} {gpus} GPU(s) per job but {has}; choose a GPU partition "
                "(BENCH_SLURM_PARTITION), fewer GPUs (BENCH_SLURM_GPUS), or hydra/launcher=slurm "
                "for CPU jobs")
    if cpus > most_cpus:
        return (f"{asks} {cpus} CPUs per job but the largest node of {where} has {most_cpus}; "
                f"set BENCH_SLURM_CPUS (hydra.launcher.cpus_per_task) to at most {most_cpus}")
    if memory_gb > most_memory_gb:
        return (f"{asks} {memory_gb} GB per job but the largest node of {where} has "
                f"{most_memory_gb:.1f} GB; set BENCH_SLURM_MEM_GB (hydra.launcher.mem_gb) to at "
                f"most {math.floor(most_memory_gb)}")
    if not any(node.gpus >= gpus and node.cpus >= cpus and node.memory_mb >= memory_gb * 1024
               for node in candidates):
        return (f"{asks} {cpus} CPUs, {memory_gb} GB and {gpus} GPU(s) per job but no single "
                f"node of {where} has all of them")
    return None


def requested_gpus(launcher: Any) -> int:
    """GPUs one job of the launcher asks for (gpus_per_node, gpus_per_task or gres)."""
    tasks = _count(launcher.get("tasks_per_node"), 1)
    gpus = _count(launcher.get("gpus_per_node")) or _count(launcher.get("gpus_per_task")) * tasks
    return gpus or gres_gpus(str(launcher.get("gres") or ""))


def device_problem(device: str, launcher: Any, name: str) -> str | None:
    """Why jobs on ``device`` cannot run on the launcher's request (``device=cuda`` with no
    GPU asked for: every job would fail inside Slurm after its start-up), else None."""
    if device.startswith("cuda") and requested_gpus(launcher) == 0:
        return (f"device={device} needs a GPU per job but hydra/launcher={name} asks for none; "
                "use hydra/launcher=slurm_gpu (or set BENCH_SLURM_GPUS), or device=cpu")
    return None


class SlurmRequestCheck(Callback):
    """Before a multirun on a Slurm launcher submits anything, checks that the cluster answers
    and that some node of the partition can hold one job; otherwise prints one line and exits
    with status 2. Other launchers are left alone."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Check the launcher's request against ``sinfo``."""
        launcher = config.hydra.launcher
        if launcher.get("_target_") not in SLURM_LAUNCHERS:
            return
        name = config.hydra.runtime.choices.get("hydra/launcher") or "submitit_slurm"
        nodes, why = slurm_nodes()
        problem = (device_problem(str(config.get("device", "cpu")), launcher, name) or why
                   or request_problem(launcher, nodes, name))
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            sys.exit(2)
