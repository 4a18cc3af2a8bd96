"""The data files a job read, each with its sha256, for the job's record (``data_sha256``).

Every reader of a data file calls :func:`note_read`; the harness clears the list before a job
(:func:`forget_reads`) and writes :func:`files_read` into the record, so a record says which
bytes its numbers came from. Hashes are cached per (path, size, modification time): a process
that reads the same file for many jobs hashes it once.
"""

from __future__ import annotations

import functools
from pathlib import Path

from bench.harness.hashing import file_sha256

_READ: dict[str, str] = {}


@functools.lru_cache(maxsize=512)
def _cached_sha256(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(path)


def stamped_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes, cached while its size and modification time stay."""
    stat = Path(path).stat()
    return _cached_sha256(str(path), stat.st_size, stat.st_mtime_ns)


def note_read(path: str | Path) -> str:
    """Note that the current job read ``path`` (a folder, e.g. an LMDB database: every file
    in it); returns the file's sha256 ("" for a folder)."""
    path = Path(path)
    if path.is_dir():
        for inner in sorted(p for p in path.rglob("*") if p.is_file()):
            note_read(inner)
        return ""
    digest = stamped_sha256(path)
    _READ[str(path)] = digest
    return digest


def files_read() -> dict[str, str]:
    """``{path: sha256}`` of the files noted since :func:`forget_reads`."""
    return dict(sorted(_READ.items()))


def forget_reads() -> None:
    """Start a new job's list."""
    _READ.clear()
