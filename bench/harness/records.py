"""Run records: one ``record.json`` per run, written atomically and never overwritten.

Layout: ``<results_dir>/<experiment>/<scale>/<config_hash>/record.json``. The hash covers
the resolved config minus keys that do not change a result (paths, resume flags), so the
same experiment, seed and settings always land in the same folder and a rerun can skip it.

Each record also carries ``record_sha256``, the SHA-256 of its own canonical JSON without that
field, checked on reading: a record edited after it was written is damaged, and so is a
schema-2 record without the field (deleting it does not switch the check off). Records of
schema 1 written before the field existed have none and are read unverified.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Version 2 records always carry record_sha256 (and data_sha256, health); version 1 records
# may lack the hash (written before it existed) and are then read unverified.
SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)
HASH_REQUIRED_SINCE = 2
RECORD_NAME = "record.json"
RECORD_HASH_FIELD = "record_sha256"
# A writer's temporary file (``.record-*.tmp``) lives for the seconds of one write; one older
# than this was left by a killed writer and is removed by the next writer or reader.
STALE_TEMPORARY_S = 600.0
TEMPORARY_PATTERN = ".record-*.tmp"
LOG_NAME = "job.log"
NON_SEMANTIC_KEYS = ("results_dir", "rerun_failed", "hydra", "sweep", "seeds", "seeds_for",
                     "scale_overrides", "verbose")
# Nested keys that choose how a job computes, not what, so switching them reuses the records.
# ``base.loop`` (the paper MLP's training loop, fast or the Lightning Trainer), ``method.loop``
# (the same for the VI baselines) and ``method.sampler`` (HMC's sampler, the fast replay or
# pyro's kernel) are tested to give the same numbers bit for bit. ``method.training``: the DE
# members trained together (one stacked network) or one by one; each step is equal within
# float rounding (tests/unit/training/test_stacked_training.py: weights within 1e-5 after 9
# steps), not bit for bit: the rounding differences grow over a long Adam run (up to 2e-2 in
# a weight after 80 steps). Both fill and reuse the same store folders, and each member's
# history.json says how it was trained. ``method.appears_in`` lists the experiments that sweep
# the method (bench.harness.method_membership): where else it is used changes nothing a job
# computes.
NON_SEMANTIC_PATHS = (("base", "loop"), ("method", "loop"), ("method", "sampler"),
                      ("method", "training"), ("method", "appears_in"))
# The keys of a ``conf/model`` node (a recipe's network, bench.training.network_store, and a
# method's, bench.methods.settings.ModelSettings) and of a method's ``prediction`` node
# (bench.methods.settings.PredictionSettings): hashed in the spelling from before them.
MODEL_NODE_KEYS = {"name", "options"}
PREDICTION_NODE_KEYS = {"batch_size"}
REQUIRED_FIELDS = (
    "schema_version", "experiment", "paper", "artifact", "scale", "seed", "protocol",
    "dataset", "method", "variant", "config", "config_hash", "status", "cells", "metrics",
    "fitted", "arrays", "timings", "versions", "git_sha", "started_at", "finished_at",
    "traceback",
)


def config_hash(config: dict[str, Any]) -> str:
    """Stable 12-hex-digit hash of a resolved config, ignoring non-semantic keys and paths;
    a config is hashed in its :func:`canonical_spelling`."""
    semantic = {k: v for k, v in config.items() if k not in NON_SEMANTIC_KEYS}
    for parent, key in NON_SEMANTIC_PATHS:
        if isinstance(semantic.get(parent), dict) and key in semantic[parent]:
            semantic[parent] = {k: v for k, v in semantic[parent].items() if k != key}
    canonical = json.dumps(canonical_spelling(semantic), sort_keys=True, separators=(",", ":"),
                           default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def canonical_spelling(value: Any) -> Any:
    """``value`` (a resolved config or part of one) with the settings sub-nodes written as
    before them, so that records keep their hashes across the respelling:

    * a training recipe's network (a mapping with ``stages`` and a ``model`` node) as
      ``model: <name>`` and, unless its options are an empty mapping, ``model_options:
      <options>`` beside it (the old configs wrote ``model_options`` only where the network
      had options, or null to clear them);
    * a method's own network (a ``model`` node without ``stages`` beside it) as
      ``network_model: <name>`` and ``network_options: <options>``;
    * a method's ``prediction: {batch_size: n}`` as ``predict_batch_size: n``.
    """
    if isinstance(value, list):
        return [canonical_spelling(item) for item in value]
    if not isinstance(value, dict):
        return value
    spelled = {key: canonical_spelling(item) for key, item in value.items()}
    model = spelled.get("model")
    if isinstance(model, dict) and set(model) == MODEL_NODE_KEYS:
        if "stages" in spelled:
            spelled["model"] = model["name"]
            if model["options"] != {}:
                spelled["model_options"] = model["options"]
        else:
            del spelled["model"]
            spelled["network_model"], spelled["network_options"] = model["name"], model["options"]
    prediction = spelled.get("prediction")
    if isinstance(prediction, dict) and set(prediction) == PREDICTION_NODE_KEYS:
        del spelled["prediction"]
        spelled["predict_batch_size"] = prediction["batch_size"]
    return spelled


def record_dir(results_dir: Path, experiment: str, scale: str, chash: str) -> Path:
    """Folder that holds the record of one run."""
    return Path(results_dir) / experiment / scale / chash


STATUSES = ("ok", "failed")


class DamagedRecord(ValueError):
    """A ``record.json`` that cannot be read or does not follow the record schema."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"damaged record {path}: {reason}")
        self.path, self.reason = Path(path), reason


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def schema_problem(record: Any) -> str | None:
    """Why ``record`` does not follow the record schema, or None when it does."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    if record["schema_version"] not in READABLE_SCHEMAS:
        return (f"schema_version {record['schema_version']!r}, expected one of "
                f"{', '.join(map(str, READABLE_SCHEMAS))}")
    if record["status"] not in STATUSES:
        return f"status {record['status']!r}, expected one of {', '.join(STATUSES)}"
    cells = record["cells"]
    if not isinstance(cells, list) or not all(
            isinstance(c, dict) and isinstance(c.get("row"), str)
            and isinstance(c.get("column"), str) and _is_number(c.get("value")) for c in cells):
        return "cells must be a list of {row, column, numeric value}"
    metrics = record["metrics"]
    if not isinstance(metrics, dict) or not all(_is_number(v) for v in metrics.values()):
        return "metrics must map names to numbers"
    return None


def record_content_hash(record: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces) of ``record`` without its
    ``record_sha256`` field."""
    content = {k: v for k, v in record.items() if k != RECORD_HASH_FIELD}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def hash_problem(record: dict[str, Any]) -> str | None:
    """Why ``record``'s content does not match its ``record_sha256``, or None when it does
    (or when it has none: a record written before the field existed)."""
    if RECORD_HASH_FIELD not in record:
        if record.get("schema_version", 1) >= HASH_REQUIRED_SINCE:
            return (f"no {RECORD_HASH_FIELD}, which every schema {HASH_REQUIRED_SINCE} record "
                    "carries: edited after it was written")
        return None
    stored, actual = record[RECORD_HASH_FIELD], record_content_hash(record)
    if stored != actual:
        return (f"content hash mismatch ({RECORD_HASH_FIELD} {str(stored)[:12]}..., content "
                f"{actual[:12]}...): edited after it was written")
    return None


def read_record_file(path: Path) -> dict[str, Any]:
    """The record in the file ``path``, validated and its content hash checked; DamagedRecord
    (naming the file) if not."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DamagedRecord(path, f"unreadable ({err})") from None
    if not text.strip():
        raise DamagedRecord(path, "empty file")
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        raise DamagedRecord(path, f"invalid JSON ({err.msg} at line {err.lineno})") from None
    problem = schema_problem(record) or hash_problem(record)
    if problem:
        raise DamagedRecord(path, problem)
    return record


def read_record(folder: Path) -> dict[str, Any] | None:
    """The record of the run folder ``folder``, or None if the run has none yet.

    Raises NotADirectoryError when ``folder`` is a file, DamagedRecord when the record is.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is a file where a run folder belongs")
    remove_stale_temporaries(folder)
    path = folder / RECORD_NAME
    if not path.exists():
        return None
    return read_record_file(path)


def set_aside(path: Path, label: str) -> Path | None:
    """Rename ``path`` (a record or log) to ``<stem>.<label>-<time>-<pid><suffix>`` beside it.

    Returns the new path, or None when another worker moved it first.
    """
    path = Path(path)
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    target = path.with_name(f"{path.stem}.{label}-{stamp}{path.suffix}")
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return None
    return target


def remove_stale_temporaries(folder: Path, older_than_s: float = STALE_TEMPORARY_S) -> None:
    """Remove the ``.record-*.tmp`` files in ``folder`` that killed writers left (older than
    ``older_than_s`` seconds); a live writer's file is younger. Errors are ignored (a reader
    may not be allowed to write, another process may remove the file first)."""
    cutoff = time.time() - older_than_s
    for path in Path(folder).glob(TEMPORARY_PATTERN):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            continue


def write_record_atomically(folder: Path, record: dict[str, Any], replace: bool = False) -> Path:
    """Write ``record.json`` into ``folder``; fail rather than overwrite an existing record
    (``replace=True``: replace it, for a tool that rewrites a record it owns, such as
    :mod:`bench.harness.rehash`).

    The record is stored as it reads back from JSON, with its ``record_sha256``. The JSON goes
    to a temporary file in the same folder, is flushed to disk, then hard-linked to its final
    name: the link either creates the complete file or fails because one exists, so readers
    never see half a record and concurrent workers never clobber each other (a replacement is
    an atomic rename: readers see the old record or the new one). Temporary files left there by
    killed writers are removed first.
    """
    folder.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(folder)
    target = folder / RECORD_NAME
    # Hash the record as a reader will see it (JSON turns tuples into lists, int keys into text).
    stored = json.loads(json.dumps({k: v for k, v in record.items() if k != RECORD_HASH_FIELD},
                                   allow_nan=True))
    stored[RECORD_HASH_FIELD] = record_content_hash(stored)
    fd, tmp = tempfile.mkstemp(prefix=".record-", suffix=".tmp", dir=folder)
    os.fchmod(fd, 0o644)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(stored, f, indent=1, sort_keys=True, allow_nan=True)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, target)
        else:
            os.link(tmp, target)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return target


def set_aside_run(folder: Path, label: str) -> Path | None:
    """Move a run's record (and its ``job.log``) aside as ``<stem>.<label>-...``, kept, so the
    run can be attempted again. Returns the record's new path, or None when another worker
    moved it first."""
    target = set_aside(folder / RECORD_NAME, label)
    if (folder / LOG_NAME).exists():
        set_aside(folder / LOG_NAME, label)
    return target


def archive_failed_record(folder: Path) -> Path | None:
    """Move a failed record (and its log) aside so the run can be attempted again."""
    return set_aside_run(folder, "failed")


# Below this much free space a run cannot write Hydra's run files and its records (a record
# with figure arrays is tens of KiB): refused before any job starts.
MIN_FREE_BYTES = 1 << 20


def unwritable_reason(folder: Path) -> str | None:
    """Create ``folder`` and write a probe file in it; why that failed (or why the disk
    holding it is too full to take a run's files), or None if it worked."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-probe-{os.getpid()}-{threading.get_ident()}"
        probe.touch()
        probe.unlink()
        free = shutil.disk_usage(folder).free
    except OSError as err:
        return err.strerror or type(err).__name__
    if free < MIN_FREE_BYTES:
        return (f"only {free // 1024} KiB free on its disk, fewer than the "
                f"{MIN_FREE_BYTES // 1024} KiB a run needs for its records and Hydra's files")
    return None


def iter_records(results_dir: Path, experiment: str, scale: str | None = None,
                 damaged: list[DamagedRecord] | None = None) -> Iterator[dict]:
    """All valid records of an experiment (optionally of one scale), in a stable order.

    Damaged records are skipped; when ``damaged`` is a list they are appended to it, so a
    report can name them as gaps. A file where a run folder belongs counts as damaged.
    Temporary files left by killed writers are removed on the way.
    """
    root = Path(results_dir) / experiment
    runs = f"{scale}/*" if scale else "*/*"
    for entry in sorted(root.glob(runs)):
        if entry.name.startswith("."):
            continue
        if not entry.is_dir():
            if damaged is not None:
                damaged.append(DamagedRecord(entry, "a file where a run folder belongs"))
            continue
        remove_stale_temporaries(entry)
        path = entry / RECORD_NAME
        if not path.is_file():
            continue
        try:
            record = read_record_file(path)
        except DamagedRecord as err:
            if damaged is not None:
                damaged.append(err)
            continue
        record["_path"] = str(path)
        yield record
