"""One job = one record: compose, run the experiment's task, write ``record.json`` atomically.

A job whose record already exists is skipped, so an interrupted multirun resumes where it
stopped. :func:`execute` is what ``python -m bench.run`` calls once per job.
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from bench.datasets.data_files import files_read, forget_reads
from bench.harness.errors import ConfigError, require_choice
from bench.harness.finished_jobs import job_identity
from bench.harness.fitted_variants import job_variants
from bench.harness.logs import job_log, logger, publish_job_log, quiet_libraries
from bench.harness.method_nodes import instantiate_method
from bench.harness.overrides import CONF_DIR
from bench.harness.process_clock import claim_first_job, seconds_since_process_start
from bench.harness.provenance import git_state, machine_load, package_versions
from bench.harness.records import (
    RECORD_NAME,
    SCHEMA_VERSION,
    DamagedRecord,
    archive_failed_record,
    read_record,
    set_aside_run,
    unwritable_reason,
    write_record_atomically,
)
from bench.harness.result import TaskResult
from bench.harness.task_inputs import check_task_inputs
from bench.harness.timing import Stopwatch

# Jobs of this process whose record says failed (``python -m bench.run`` exits 1 if any).
FAILED_JOBS: list[str] = []
# A folder the submitting ``python -m bench.run`` creates and names in the environment its jobs
# inherit (also through Slurm): every failed job leaves a file there, so the submitting process
# sees the failures of jobs that ran in other processes (:func:`failed_job_markers`).
FAILED_JOBS_DIR_ENV = "BENCH_FAILED_JOBS_DIR"


def note_failed_job(folder: Path) -> None:
    """Add the failed job's run folder to :data:`FAILED_JOBS` and, when the submitting process
    asked for it (:data:`FAILED_JOBS_DIR_ENV`), leave a marker file naming it there."""
    FAILED_JOBS.append(str(folder))
    markers = os.environ.get(FAILED_JOBS_DIR_ENV)
    if not markers:
        return
    name = hashlib.sha256(str(folder).encode()).hexdigest()[:16]
    try:
        (Path(markers) / name).write_text(str(folder), encoding="utf-8")
    except OSError as err:  # the submitting process's folder is gone or not shared
        logger.warning("could not note the failed job %s in %s: %s", folder, markers, err)


def failed_job_markers(markers: Path) -> list[str]:
    """The run folders of the failed jobs noted in ``markers`` (:func:`note_failed_job`)."""
    if not markers.is_dir():
        return []
    return sorted(path.read_text(encoding="utf-8") for path in markers.iterdir()
                  if path.is_file())


def is_launcher_stop(err: BaseException) -> bool:
    """Whether ``err`` is the launcher stopping the job rather than the task failing: submitit
    raises ``UncompletedJobError`` inside the job at a time limit it does not requeue. Such a
    job has no result and must not leave a failed record that later runs would skip."""
    return (type(err).__name__ == "UncompletedJobError"
            and type(err).__module__.startswith("submitit"))


class NonFiniteResult(RuntimeError):
    """A task produced NaN or infinite values; the run is marked failed."""


def check_device(device: str) -> None:
    """Reject unknown devices and CUDA requests on machines without CUDA."""
    import torch

    kind = device.split(":")[0]
    require_choice("device", kind, ["cpu", "cuda"])
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={device!r} is not available on this machine; use device=cpu")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _run_task(cfg: DictConfig) -> tuple[TaskResult | None, str | None, str | None]:
    task = hydra.utils.get_method(cfg.task._target_)
    forget_reads()
    try:
        result = task(cfg)
        bad = result.non_finite()
        if bad:
            raise NonFiniteResult(f"non-finite values in: {', '.join(bad[:10])}")
        return result, None, None
    except ConfigError:
        raise
    except Exception as err:
        if is_launcher_stop(err):
            raise
        user_error = config_error_in_chain(err)
        if user_error is not None:
            raise user_error from None
        return None, f"{type(err).__name__}: {err}", traceback.format_exc()


def execute(cfg: DictConfig, cli_overrides: list[str] | None = None) -> dict[str, Any]:
    """Run one job for a composed config; returns its record (existing or new)."""
    return run_job(cfg, cli_overrides)[1]


def run_job(cfg: DictConfig, cli_overrides: list[str] | None = None) -> tuple[str, dict]:
    """Run one job; ``(outcome, record)`` with outcome ``ok``, ``failed`` or ``skipped``."""
    first_job = claim_first_job()
    identity = job_identity(cfg, cli_overrides or [])
    cfg, resolved, chash, folder = (identity.cfg, identity.resolved, identity.config_hash,
                                    identity.folder)
    check_device(cfg.device)
    existing = finished_record(folder)
    if existing is not None:
        if existing["status"] == "failed" and cfg.rerun_failed:
            archive_failed_record(folder)
        else:
            hint = " (rerun_failed=true runs it again)" if existing["status"] == "failed" else ""
            logger.info("skip %s [%s] %s%s", cfg.name, existing["status"], folder, hint)
            if existing["status"] == "failed":
                note_failed_job(folder)  # the run's result holds a failure: it exits 1
            return "skipped", existing
    check_task_inputs(cfg, hydra.utils.get_method(cfg.task._target_), CONF_DIR)
    check_dataset_node(cfg)
    check_method_node(cfg)
    require_writable(folder)

    quiet_libraries(bool(cfg.get("verbose", False)))
    with job_log(folder) as log_path:
        logger.info("run %s seed=%s -> %s", cfg.name, cfg.seed, folder)
        started, watch = _now(), Stopwatch()
        load_at_start, cpu_clock = machine_load(), time.process_time()
        startup = seconds_since_process_start() if first_job else None
        try:
            result, error, trace = _run_task(cfg)
        except BaseException:
            # Bad input found while the task ran (a ConfigError: a checkpoint of another
            # architecture, a stored state whose recipe changed) or Ctrl-C: nothing of the job
            # stays behind, so a rerun starts it afresh.
            log_path.unlink(missing_ok=True)
            remove_empty_folders(folder, Path(cfg.results_dir))
            raise
        total = watch.elapsed()
        clock = JobClock(total, time.process_time() - cpu_clock, load_at_start, machine_load())
        record = _record(cfg, resolved, chash, result, error, trace, started, clock, startup)
        try:
            write_record_atomically(folder, record)
        except FileExistsError:
            record = None
        except OSError as err:  # a full disk, a lost mount: the result cannot be kept
            log_path.unlink(missing_ok=True)
            remove_empty_folders(folder, Path(cfg.results_dir))
            raise ConfigError(f"cannot write record {folder / RECORD_NAME} "
                              f"({err.strerror or err}); the job's result is lost: free space "
                              "or set results_dir= or BENCH_RESULTS_DIR to another folder, "
                              "then run it again") from None
        else:
            logger.info("%s %s seed=%s %.2fs %s%s", record["status"], cfg.name, cfg.seed,
                        total, folder, f": {error}" if error else "")
    if record is None:
        log_path.unlink(missing_ok=True)
        logger.info("skip %s: another worker finished %s first", cfg.name, folder)
        return "skipped", finished_record(folder)
    publish_job_log(log_path)
    if error:
        note_failed_job(folder)
        print(f"  {error}", file=sys.stderr)
    return record["status"], record


def remove_empty_folders(folder: Path, root: Path) -> None:
    """Remove ``folder`` and its parents below ``root`` while they are empty."""
    root = root.resolve()
    folder = folder.resolve()
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:  # not empty (another job's files) or already gone
            return
        folder = folder.parent


def config_error_in_chain(err: BaseException) -> ConfigError | None:
    """The ConfigError ``err`` is or wraps (Hydra's instantiate wraps it), else None."""
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, ConfigError):
        cause = cause.__cause__ or cause.__context__
    return cause


def check_dataset_node(cfg: DictConfig) -> None:
    """Build the dataset node once before the task, so its own checks (positive sizes and
    variances, known names) stop a bad value with one line instead of a failed record."""
    node = cfg.get("dataset")
    if node is None or "_target_" not in node:
        return
    try:
        hydra.utils.instantiate(node)
    except Exception as err:  # noqa: BLE001 - only a ConfigError in the chain is the user's
        cause = config_error_in_chain(err)
        if cause is not None:
            raise cause from None


def check_method_node(cfg: DictConfig) -> None:
    """Build the method node as it is and each of its variants once before the task, so the
    class's own checks (known structures, positive temperatures) stop a bad value with one
    line (tasks use either the node or its variants)."""
    node = cfg.get("method")
    if node is None or "_target_" not in node:
        return
    for arguments in ({}, *job_variants(node).values()):
        try:
            instantiate_method(node, **arguments)
        except Exception as err:  # noqa: BLE001 - only a ConfigError in the chain is the user's
            cause = config_error_in_chain(err)
            if cause is not None:
                raise cause from None


def finished_record(folder: Path) -> dict | None:
    """The valid record in ``folder``, if any; a damaged one is set aside (kept) and logged."""
    try:
        return read_record(folder)
    except NotADirectoryError as err:
        raise ConfigError(f"{err}; move it away or choose another results_dir") from None
    except DamagedRecord as err:
        moved = set_aside_run(folder, "damaged")
        logger.warning("%s; kept as %s, running the job again", err, moved)
        return None


def require_writable(folder: Path) -> None:
    """Create the run folder, or fail with one line before any work is done."""
    reason = unwritable_reason(folder)
    if reason:
        raise ConfigError(f"cannot write records to {folder} ({reason}); set results_dir= or "
                          "BENCH_RESULTS_DIR to a writable folder")


@dataclass(frozen=True)
class JobClock:
    """How long a job took: wall seconds, this process's CPU seconds (every thread), and
    :func:`~bench.harness.provenance.machine_load` at its start and end."""

    wall_s: float
    cpu_s: float
    load_at_start: dict
    load_at_end: dict


def _record(cfg: DictConfig, resolved: dict, chash: str, result: TaskResult | None,
            error: str | None, trace: str | None, started: str, clock: JobClock,
            startup: float | None = None) -> dict:
    """The run record of one finished (or failed) job; ``startup``: seconds from the process
    start to the task's (:mod:`bench.harness.process_clock`), for a process's first job."""
    result = result or TaskResult()
    first = {} if startup is None else {"startup_s": startup}
    return {
        "schema_version": SCHEMA_VERSION,
        "experiment": cfg.name,
        "paper": cfg.paper,
        "artifact": cfg.artifact,
        "scale": cfg.scale.name,
        "seed": int(cfg.seed),
        "protocol": cfg.protocol.name,
        "dataset": cfg.dataset.name,
        "method": cfg.method.name,
        "variant": str(cfg.get("variant", "default")),
        "config": resolved,
        "config_hash": chash,
        "status": "failed" if error else "ok",
        "cells": [c.__dict__ for c in result.cells],
        "failed_cells": result.failed_cells,
        "metrics": {k: float(v) for k, v in result.metrics.items()},
        "fitted": result.fitted,
        "health": result.health,
        "data_sha256": files_read(),
        "arrays": {k: [_json_float(x) for x in v] for k, v in result.arrays.items()},
        "timings": {**result.timings, "total_s": clock.wall_s, "cpu_s": clock.cpu_s,
                    **first},
        "machine_load": {"at_start": clock.load_at_start, "at_end": clock.load_at_end},
        "versions": package_versions(),
        **git_state(),
        "host": socket.gethostname(),
        "device": cfg.device,
        "started_at": started,
        "finished_at": _now(),
        "error": error,
        "traceback": trace,
    }


def _json_float(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None
