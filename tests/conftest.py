"""Session set-up: a data root for the experiments that read files (the UCI tables)."""

from __future__ import annotations

import os

import pytest

from tests.helpers import SHARED_DATA


@pytest.fixture(scope="session", autouse=True)
def data_root(tmp_path_factory):
    """``BENCH_DATA_DIR`` as given, else the shared data when present, else generated files
    with the real UCI column layout (``tests.unit.datasets.test_uci``), so every experiment
    can run."""
    if os.environ.get("BENCH_DATA_DIR"):
        yield os.environ["BENCH_DATA_DIR"]
        return
    if (SHARED_DATA / "uci").is_dir():
        root = SHARED_DATA
    else:
        from tests.unit.datasets.test_uci import _write_fixtures

        root = tmp_path_factory.mktemp("uci-data")
        _write_fixtures(root)
    os.environ["BENCH_DATA_DIR"] = str(root)
    yield str(root)
    del os.environ["BENCH_DATA_DIR"]
