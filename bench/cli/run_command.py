"""Hydra entry point: ``python -m bench.run experiment=ssla/figure-1 scale=cpu seed=42``.

One job = one record (:func:`bench.harness.job_execution.execute`); Hydra's ``-m`` runs a multirun.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from bench.cli.interrupt import INTERRUPTED, INTERRUPTED_STATUS
from bench.cli.single_run import VERSION_BASE, run_single
from bench.harness.errors import ConfigError
from bench.harness.job_execution import (
    FAILED_JOBS,
    FAILED_JOBS_DIR_ENV,
    failed_job_markers,
    run_job,
)
from bench.harness.overrides import (
    CONF_DIR,
    check_overrides,
    drop_empty_results_dir,
    require_writable_results_dir,
)


def _task_overrides() -> list[str]:
    try:
        return list(HydraConfig.get().overrides.task)
    except ValueError:
        return []


def job(cfg: DictConfig) -> str:
    """The job function Hydra calls once per job; returns ok, failed or skipped."""
    try:
        return run_job(cfg, _task_overrides())[0]
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


hydra_main = hydra.main(config_path=str(CONF_DIR), config_name="config",
                        version_base=VERSION_BASE)(job)


def main(argv: list[str] | None = None) -> None:
    """Validate the command line, then hand it to Hydra; Ctrl-C stops with one line, exit 130."""
    try:
        _validate_and_run(sys.argv[1:] if argv is None else argv)
    except (KeyboardInterrupt, SystemExit) as stop:
        if not interrupted(stop):
            raise
        print(INTERRUPTED, file=sys.stderr)
        sys.exit(INTERRUPTED_STATUS)


def _validate_and_run(argv: list[str]) -> None:
    argv = drop_empty_results_dir(argv)
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    try:
        check_overrides(overrides)
        results_dir = require_writable_results_dir(overrides)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *argv]
    with failure_markers(Path(results_dir)) as markers:
        if any(arg.startswith("-") for arg in argv):
            hydra_main()
        else:
            run_single(argv, job)
        failed = sorted({*FAILED_JOBS, *failed_job_markers(markers)})
    if failed:
        print(f"error: {len(failed)} job(s) failed (in this run or, skipped, in an earlier "
              "one: rerun_failed=true runs those again); their records hold the tracebacks: "
              f"{', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


@contextmanager
def failure_markers(results_dir: Path) -> Iterator[Path]:
    """A fresh folder under ``results_dir`` (shared with the jobs, wherever a launcher runs
    them) named in the environment the jobs inherit, where each failed job leaves a marker
    (:func:`bench.harness.job_execution.note_failed_job`); removed afterwards."""
    parent = results_dir / ".hydra"
    parent.mkdir(parents=True, exist_ok=True)
    markers = Path(tempfile.mkdtemp(prefix="failed-jobs-", dir=parent))
    before = os.environ.get(FAILED_JOBS_DIR_ENV)
    os.environ[FAILED_JOBS_DIR_ENV] = str(markers)
    try:
        yield markers
    finally:
        if before is None:
            os.environ.pop(FAILED_JOBS_DIR_ENV, None)
        else:
            os.environ[FAILED_JOBS_DIR_ENV] = before
        shutil.rmtree(markers, ignore_errors=True)


def interrupted(stop: BaseException) -> bool:
    """Whether ``stop`` is Ctrl-C, or an exit raised while handling one (Lightning's Trainer
    answers Ctrl-C with ``sys.exit(1)``)."""
    cause: BaseException | None = stop
    while cause is not None:
        if isinstance(cause, KeyboardInterrupt):
            return True
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    return False


if __name__ == "__main__":
    raise SystemExit(main())
