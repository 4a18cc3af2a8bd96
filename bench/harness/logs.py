"""Logging for jobs: one log file beside each record, libraries quiet unless asked.

Jobs log through the standard ``logging`` module (logger ``bench``). Hydra's job logging
(``conf/hydra/job_logging/bench.yaml``) prints INFO lines to the console; :func:`job_log`
also writes the job's lines into ``job.log`` in the record's folder. Library banners, tips
and known harmless warnings (Lightning's device banner and litlogger tip, the
``torch.jit.script`` deprecation) are silenced unless the config says ``verbose=true``.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.harness.records import LOG_NAME

LIBRARY_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning",
                   "lightning_fabric", "pyro", "optuna")
NOISY_WARNINGS = (r".*(num_workers|LeafSpec|litlogger|torch\.jit\.script. is deprecated|"
                  r"does not have many workers|smaller than the logging|"
                  r"non-full backward hook|ASDL backend is used which does not support).*")
FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

logger = logging.getLogger("bench")
_verbose = False


def quiet_libraries(verbose: bool = False) -> None:
    """Raise library loggers to WARNING and ignore known noisy warnings, unless ``verbose``.

    ``verbose`` also lowers the root logger to INFO, so libraries' INFO lines show.
    """
    global _verbose
    _verbose = verbose
    level = logging.INFO if verbose else logging.WARNING
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(level)
    if verbose:
        logging.getLogger().setLevel(logging.INFO)
    else:
        warnings.filterwarnings("ignore", message=NOISY_WARNINGS)


@contextmanager
def quiet_lightning() -> Iterator[None]:
    """Run a block that trains with Lightning without its banners, tips or known warnings.

    Lightning sets its loggers to INFO and adds a console handler when it is first imported,
    so the levels are raised here, after the import, and restored afterwards.
    """
    import lightning  # noqa: F401  (configures the loggers quieted below)

    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(logging.INFO if _verbose else logging.WARNING)
    try:
        with warnings.catch_warnings():
            if not _verbose:
                warnings.filterwarnings("ignore", message=NOISY_WARNINGS)
            yield
    finally:
        for each, level in zip(loggers, levels, strict=True):
            each.setLevel(level)


@contextmanager
def job_log(folder: Path) -> Iterator[Path]:
    """Copy every log line of the job into ``folder/job.log``.

    Lines go to a temporary file first; :func:`publish_job_log` gives it its final name once
    the record is written, so a log never overwrites another run's log.
    """
    folder.mkdir(parents=True, exist_ok=True)
    # Per process and thread: two workers of one process on the same job must not share it.
    path = folder / f".job-{os.getpid()}-{threading.get_ident()}.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FILE_FORMAT))
    handler.addFilter(_harness_info_or_any_warning)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        handler.close()


def _harness_info_or_any_warning(record: logging.LogRecord) -> bool:
    """The job log keeps the harness's INFO lines and every library's warnings."""
    return record.levelno >= logging.WARNING or record.name.startswith("bench")


def publish_job_log(temporary: Path) -> Path | None:
    """Rename a job's temporary log to ``job.log`` beside its record (never overwriting)."""
    target = temporary.with_name(LOG_NAME)
    try:
        os.link(temporary, target)
    except FileExistsError:
        return None
    except FileNotFoundError:
        return None
    finally:
        if temporary.exists():
            temporary.unlink()
    return target
