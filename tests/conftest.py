"""Session set-up: a data root for the experiments that read files (the UCI tables)."""

from __future__ import annotations

import os

import pytest

from tests.helpers import SHARED_DATA


@pytest.fixture(scope="session", autouse=True)
def data_root(tmp_path_factory):
    """``BENCH_DATA_DIR`` as given, else the shared data when present, else generated files
    in the real formats (UCI column layouts, MNIST and Fashion-MNIST IDX, KMNIST npz files),
    so every experiment that has its data here can run."""
    if os.environ.get("BENCH_DATA_DIR"):
        yield os.environ["BENCH_DATA_DIR"]
        return
    if (SHARED_DATA / "uci").is_dir():
        root = SHARED_DATA
    else:
        import numpy as np

        from tests.unit.datasets.image_fixtures import write_kmnist_npz, write_mnist_like
        from tests.unit.datasets.test_uci import _write_fixtures

        root = tmp_path_factory.mktemp("bench-data")
        _write_fixtures(root)
        rng = np.random.default_rng(0)
        write_mnist_like(root / "mnist", rng, sizes=(600, 400))
        write_mnist_like(root / "fashion_mnist", rng, sizes=(64, 400))
        write_kmnist_npz(root / "kmnist", rng, sizes=(64, 400))
    os.environ["BENCH_DATA_DIR"] = str(root)
    yield str(root)
    del os.environ["BENCH_DATA_DIR"]
