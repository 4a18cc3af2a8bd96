"""Files of the trained-network and trained-state stores: atomic writes and an exclusive lock.

Writers put a file beside its final name and ``os.replace`` it, so a reader sees either the old
file or the complete new one; one process at a time trains a given (recipe, seed) under an
``fcntl.flock`` on a lock file beside its folder.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

logger = logging.getLogger("bench.training")


def save_atomically(path: Path, write: Callable[[Any], None]) -> None:
    """``write(file)`` into a temporary file beside ``path``, flushed, then ``os.replace``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, values: dict) -> None:
    """``values`` as indented JSON with sorted keys, written atomically."""
    text = json.dumps(values, indent=1, sort_keys=True)
    save_atomically(path, lambda f: f.write(text.encode("utf-8")))


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if absent), waiting for it if another
    process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another process training %s", path.with_suffix(""))
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
