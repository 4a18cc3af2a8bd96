"""Run records: one ``record.json`` per run, written atomically and never overwritten.

Layout: ``<results_dir>/<experiment>/<scale>/<config_hash>/record.json``. The hash covers
the resolved config minus keys that do not change a result (paths, resume flags), so the
same experiment, seed and settings always land in the same folder and a rerun can skip it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
RECORD_NAME = "record.json"
NON_SEMANTIC_KEYS = ("results_dir", "rerun_failed", "hydra", "sweep", "seeds", "seeds_for",
                     "scale_overrides", "verbose")
REQUIRED_FIELDS = (
    "schema_version", "experiment", "paper", "artifact", "scale", "seed", "protocol",
    "dataset", "method", "variant", "config", "config_hash", "status", "cells", "metrics",
    "fitted", "arrays", "timings", "versions", "git_sha", "started_at", "finished_at",
    "traceback",
)


def config_hash(config: dict[str, Any]) -> str:
    """Stable 12-hex-digit hash of a resolved config, ignoring non-semantic keys."""
    semantic = {k: v for k, v in config.items() if k not in NON_SEMANTIC_KEYS}
    canonical = json.dumps(semantic, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def record_dir(results_dir: Path, experiment: str, scale: str, chash: str) -> Path:
    """Folder that holds the record of one run."""
    return Path(results_dir) / experiment / scale / chash


def read_record(path: Path) -> dict[str, Any] | None:
    """The record at ``path`` (a record.json or its folder), or None if there is none."""
    path = Path(path)
    if path.is_dir():
        path = path / RECORD_NAME
    if not path.exists():
        return None
    with open(path) as f:
        return json.load(f)


def write_record_atomically(folder: Path, record: dict[str, Any]) -> Path:
    """Write ``record.json`` into ``folder``; fail rather than overwrite an existing record.

    The JSON goes to a temporary file in the same folder, is flushed to disk, then hard-linked
    to its final name: the link either creates the complete file or fails because one exists,
    so readers never see half a record and concurrent workers never clobber each other.
    """
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / RECORD_NAME
    fd, tmp = tempfile.mkstemp(prefix=".record-", suffix=".tmp", dir=folder)
    os.fchmod(fd, 0o644)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True, allow_nan=True)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, target)
    finally:
        os.unlink(tmp)
    return target


def archive_failed_record(folder: Path) -> Path:
    """Move a failed record (and its log) aside, kept, so the run can be attempted again."""
    source = folder / RECORD_NAME
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    target = folder / f"record.failed-{stamp}.json"
    os.rename(source, target)
    log = folder / "job.log"
    if log.exists():
        os.rename(log, folder / f"job.failed-{stamp}.log")
    return target


def iter_records(results_dir: Path, experiment: str, scale: str | None = None) -> Iterator[dict]:
    """All records of an experiment (optionally of one scale), in a stable order."""
    root = Path(results_dir) / experiment
    pattern = f"{scale}/*/{RECORD_NAME}" if scale else f"*/*/{RECORD_NAME}"
    for path in sorted(root.glob(pattern)):
        record = read_record(path)
        if record is not None:
            record["_path"] = str(path)
            yield record
