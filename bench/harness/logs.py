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
import sys
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
    root, handler = logging.getLogger(), None
    try:
        handler = JobLogHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter(FILE_FORMAT))
        handler.addFilter(_harness_info_or_any_warning)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
        root.addHandler(handler)
        yield path
    except BaseException:
        # Ctrl-C or an error at any point of the job, its first log line included: the
        # temporary log does not stay behind (a hard kill's does; see keep_unfinished_logs).
        path.unlink(missing_ok=True)
        raise
    finally:
        if handler is not None:
            root.removeHandler(handler)
            handler.close()


class JobLogHandler(logging.FileHandler):
    """A file handler whose write errors (a full disk, a lost mount) cost one line on stderr
    for the whole job instead of Python's "--- Logging error ---" traceback for every line:
    the lines still reach the console."""

    failed = False
    closed = False

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record``; nothing once closed. Another thread's job may still hold this
        handler in the root logger's list it is going through, and logging's file handler
        opens its file again for a line that arrives after close: a temporary log already
        published or removed would reappear."""
        if self.closed:
            return
        super().emit(record)

    def close(self) -> None:
        """Close the file; a last write that fails is reported like the others."""
        self.closed = True
        try:
            super().close()
        except OSError:
            self.handleError(None)

    def handleError(self, record: logging.LogRecord | None) -> None:  # noqa: N802 - logging's name
        """Say once that the job log cannot be written."""
        if self.failed:
            return
        self.failed = True
        err = sys.exc_info()[1]
        reason = getattr(err, "strerror", None) or err
        print(f"warning: cannot write the job log {self.baseFilename} ({reason}); its lines "
              "go to the console only", file=sys.stderr)


def _harness_info_or_any_warning(record: logging.LogRecord) -> bool:
    """The job log keeps the harness's INFO lines and every library's warnings."""
    return record.levelno >= logging.WARNING or record.name.startswith("bench")


TEMPORARY_LOG_PATTERN = ".job-*.log"
UNFINISHED_LOG_PREFIX = "job.unfinished-"


def keep_unfinished_logs(folder: Path, own: Path) -> list[Path]:
    """Give every other temporary log in ``folder`` a visible name, ``job.unfinished-<pid>-
    <thread>.log``: the lines of an attempt killed before its record (a hard kill, a lost
    node) or of a worker racing this one, kept beside the record instead of hidden."""
    kept = []
    for path in sorted(folder.glob(TEMPORARY_LOG_PATTERN)):
        if path == own:
            continue
        target = folder / f"{UNFINISHED_LOG_PREFIX}{path.name.removeprefix('.job-')}"
        try:
            os.link(path, target)
            path.unlink()
        except OSError:  # its worker removed it meanwhile, or the name is taken: leave it
            continue
        kept.append(target)
    return kept


def publish_job_log(temporary: Path) -> Path | None:
    """Rename a job's temporary log to ``job.log`` beside its record (never overwriting), and
    keep the temporary logs of unfinished attempts under visible names
    (:func:`keep_unfinished_logs`)."""
    keep_unfinished_logs(temporary.parent, temporary)
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
