"""Where report files go, and how they are written (atomically: readers never see half a file)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

SUMMARY_SUFFIX = ".summary.json"


def write_atomically(path: Path, data: str | bytes) -> Path:
    """Replace ``path`` with ``data`` in one step (readers never see a partial file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def report_paths(paper: str, artifact: str, out_dir: Path) -> dict[str, Path]:
    """Where an artifact's report files go: ``<out_dir>/<paper>/<artifact>.<ext>``."""
    folder = Path(out_dir) / paper
    return {ext: folder / f"{artifact}.{ext}" for ext in ("md", "csv", "tex", "png")}


def summary_path(paper: str, artifact: str, out_dir: Path) -> Path:
    """The machine-readable summary beside a report:
    ``<out_dir>/<paper>/<artifact>.summary.json``."""
    return Path(out_dir) / paper / f"{artifact}{SUMMARY_SUFFIX}"
