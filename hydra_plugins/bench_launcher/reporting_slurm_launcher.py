"""The Slurm launcher of ``hydra/launcher=slurm``: submitit's, made to say what its jobs do.

:class:`ReportingSlurmLauncher` submits the multirun as the submitit plugin's launcher does (one
Slurm array, each task one Hydra job, checkpointed and requeued at its time limit), then, instead
of blocking silently on the results, polls Slurm every :data:`POLL_S` seconds and prints the
lines of :class:`bench.harness.slurm_watch.SlurmWatch`: one per job as it starts, is requeued,
ends (completed, failed, timed out, cancelled: Slurm's id, state and log path), a line with
Slurm's reason while jobs pend, the local launcher's ``[k/N]`` progress line and a summary.

A job that Slurm ended without a result (cancelled, killed, out of its requeues) is no traceback
in the submitting command: its line says how it ended, it is counted with the failed jobs, and
the command exits 1 naming it (:func:`bench.cli.run_command.main`), as for a failed record. It
leaves no record, so the next run of the multirun runs it again.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import OmegaConf

from bench.harness.job_execution import FAILED_JOBS, is_launcher_stop
from bench.harness.multirun_progress import progress_line
from bench.harness.slurm_watch import (
    FINAL_STATES,
    PENDING_NOTE_S,
    PENDING_REPEAT_S,
    SlurmWatch,
    WatchedJob,
    plain_state,
    seconds_from_environment,
)

logger = logging.getLogger("bench.multirun")
# Seconds between two polls of Slurm (sacct through submitit's watcher, squeue for reasons).
POLL_S = 5.0
SQUEUE_TIMEOUT_S = 30
# Seconds to wait for Slurm's accounting to name the final state of a job without a result.
FINAL_STATE_WAIT_S = 30.0
# The launcher keys that configure the executor rather than each job.
EXECUTOR_KEYS = ("submitit_folder", "max_num_timeout")


def squeue_reasons(job_ids: list[str]) -> dict[str, str] | None:
    """Slurm's reason for each of ``job_ids`` that squeue lists as pending (array tasks by
    their ``<array>_<task>`` id); None when squeue does not answer."""
    if not job_ids:
        return {}
    try:
        done = subprocess.run(["squeue", "-h", "-r", "-t", "PD", "-o", "%i|%r", "-j",
                               ",".join(job_ids)], capture_output=True, text=True,
                              timeout=SQUEUE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    reasons = {}
    for line in done.stdout.splitlines():
        job_id, _, reason = line.strip().partition("|")
        if job_id:
            reasons[job_id] = reason
    return reasons


def job_label(overrides: Sequence[str], index: int) -> str:
    """``#<index> <the job's overrides>`` (Hydra's own and ``results_dir`` left out)."""
    shown = [o for o in filter_overrides(list(overrides)) if not o.startswith("results_dir=")]
    return f"#{index} {' '.join(shown)}".strip()


def one_line(err: BaseException) -> str:
    """The last non-empty line of an exception's text (submitit's errors carry the job's
    whole log), prefixed by its type."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[-1] if lines else ''}".strip()


def final_state(job: Any, outcome: str) -> str:
    """Slurm's final state of a job that ended. A job submitit stopped at a time limit it did
    not requeue is ``TIMEOUT`` (Slurm sees a process that exited). Slurm's accounting may lag
    the job's result file: a job that returned a result is ``COMPLETED``; for one without a
    result Slurm is asked again for up to :data:`FINAL_STATE_WAIT_S` seconds until it names a
    final state."""
    if outcome.startswith("no record: timed out"):
        return "TIMEOUT"
    deadline = time.monotonic() + FINAL_STATE_WAIT_S
    while True:
        state = plain_state(job.watcher.get_state(job.job_id, mode="cache"))
        if state in FINAL_STATES:
            return state
        if outcome.startswith("record"):
            return "COMPLETED"
        if time.monotonic() > deadline:
            return state
        time.sleep(1.0)
        job.watcher.update()


def job_error_line(stderr_log: Path) -> str:
    """The last ``error: ...`` line a job wrote to its standard error (bench's one-line errors:
    a missing data set, a bad value), or "" when there is none or no log."""
    try:
        lines = stderr_log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errors = [line.strip() for line in lines if line.startswith("error: ")]
    return errors[-1] if errors else ""


class ReportingSlurmLauncher(SlurmLauncher):
    """submitit's Slurm launcher that prints each job's progress and never a traceback for a
    job Slurm ended (see the module docstring)."""

    def _executor(self) -> Any:
        import submitit

        per_job = set(OmegaConf.structured(BaseQueueConf).keys())
        executor = submitit.AutoExecutor(
            folder=self.params["submitit_folder"], cluster="slurm",
            slurm_max_num_timeout=self.params["max_num_timeout"])
        executor.update_parameters(**{
            key if key in per_job else f"slurm_{key}": value
            for key, value in self.params.items() if key not in EXECUTOR_KEYS})
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        """Submit one array of ``job_overrides``, report on it until every job ended, and
        return the jobs' results (a Slurm-ended job: a failed status, no traceback)."""
        assert self.config is not None and job_overrides
        executor = self._executor()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        indices = [initial_job_idx + k for k in range(len(job_overrides))]
        arguments = [(list(overrides), "hydra.sweep.dir", index, f"job_id_for_{index}",
                      Singleton.get_state())
                     for index, overrides in zip(indices, job_overrides, strict=True)]
        jobs = executor.map_array(self, *zip(*arguments, strict=True))
        watch = SlurmWatch(
            [WatchedJob(job.job_id, job_label(overrides, index), str(job.paths.stdout))
             for job, overrides, index in zip(jobs, job_overrides, indices, strict=True)],
            seconds_from_environment("BENCH_SLURM_PENDING_NOTE_S", PENDING_NOTE_S),
            seconds_from_environment("BENCH_SLURM_PENDING_REPEAT_S", PENDING_REPEAT_S))
        logger.info(watch.submitted_line(str(Path(str(jobs[0].paths.folder)).parent)))
        try:
            returns = self._follow(jobs, watch, job_overrides)
        except KeyboardInterrupt:
            arrays = sorted({str(job.job_id).split("_")[0] for job in jobs})
            logger.info(f"slurm: the submitted jobs go on in Slurm (`scancel {' '.join(arrays)}` "
                        "stops them); running this command again skips the finished ones")
            raise
        logger.info(watch.summary_line())
        return returns

    def _follow(self, jobs: list[Any], watch: SlurmWatch,
                job_overrides: Sequence[Sequence[str]]) -> list[JobReturn]:
        started = time.perf_counter()
        returns: dict[int, JobReturn] = {}
        counts = {"done": 0, "failed": 0, "skipped": 0}
        while len(returns) < len(jobs):
            watcher = jobs[0].watcher
            watcher.update()
            states = {job.job_id: watcher.get_state(job.job_id, mode="cache") for job in jobs}
            pending = [job_id for job_id, state in states.items() if state == "PENDING"]
            for line in watch.update(states, squeue_reasons(pending), time.monotonic()):
                logger.info(line)
            for k, job in enumerate(jobs):
                if k in returns or not job.done():
                    continue
                returns[k], outcome = self._result(job, job_overrides[k])
                state = final_state(job, outcome)
                if outcome.startswith("no record"):
                    FAILED_JOBS.append(f"slurm job {job.job_id} ({state}, "
                                       f"{outcome.removeprefix('no record: ')}; log "
                                       f"{job.paths.stdout})")
                logger.info(watch.ended_line(watch.jobs[k], state, outcome))
                counts["done" if outcome in ("record ok", "record skipped") else "failed"] += 1
                counts["skipped"] += outcome == "record skipped"
                logger.info(progress_line(counts["done"], counts["failed"], counts["skipped"],
                                          len(jobs), time.perf_counter() - started))
            if len(returns) < len(jobs):
                time.sleep(POLL_S)
        return [returns[k] for k in range(len(jobs))]

    @staticmethod
    def _result(job: Any, overrides: Sequence[str]) -> tuple[JobReturn, str]:
        """The job's JobReturn and its outcome in words: ``record <status>`` for a job that
        ran, ``no record: <why>`` for one Slurm ended (a failed status, no traceback)."""
        try:
            returned = job.result()
        except Exception as err:  # noqa: BLE001 - submitit's errors for a job without result
            why = job_error_line(Path(job.paths.stderr)) or one_line(err)
            return (JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED,
                              _return_value="failed"), f"no record: {why}")
        if returned.status != JobStatus.COMPLETED:
            # The job itself raised (submitit out of requeues at a time limit, or the harness):
            # no record; the traceback stays in the job's log.
            stopped = returned._return_value
            why = ("timed out: " if is_launcher_stop(stopped) else "") + one_line(stopped)
            return (JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED,
                              _return_value="failed"), f"no record: {why}")
        return returned, f"record {returned._return_value}"
