"""SHA-256 digests the stores and the data checks compare: of a file's bytes, and of a plain
JSON dict in canonical form (sorted keys, no spaces, no NaN), so equal dicts give equal hashes
whatever their key order."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

HASH_DIGITS = 12
READ_BLOCK = 1 << 20


def file_sha256(path: Path | str) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(READ_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical_json(values: dict) -> str:
    """``values`` as JSON with sorted keys and no spaces; TypeError or ValueError for a value
    JSON cannot hold (NaN and infinities included)."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"), allow_nan=False)


def json_hash(values: dict) -> str:
    """First 12 hex digits of the SHA-256 of ``values``'s :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(values).encode()).hexdigest()[:HASH_DIGITS]
