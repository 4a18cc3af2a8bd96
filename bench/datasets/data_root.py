"""Where the harness looks for downloaded or copied data sets.

The root is ``$BENCH_DATA_DIR`` when that variable is set and not empty, else ``./data``
relative to the current working directory (``data/`` is git-ignored). Loaders put each data
set in a sub-folder of it, e.g. ``<root>/uci/concrete/Concrete_Data.xls``; pointing
``BENCH_DATA_DIR`` at the shared offline copies (``../shared/data``) makes every loader work
without network access.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "BENCH_DATA_DIR"
DEFAULT_DATA_DIR = "data"


def data_root() -> Path:
    """The data root: ``$BENCH_DATA_DIR`` if set and not empty, else ``./data`` (cwd-relative)."""
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)
