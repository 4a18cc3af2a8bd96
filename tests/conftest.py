"""Session set-up: the pinned float arithmetic, and a data root for the experiments that read
files (the UCI tables).

The tests compute in the pinned arithmetic (:mod:`bench.harness.arithmetic`), set here before
any library chooses its kernels: the processes the tests start (pytest-xdist workers, command
lines) run in it from their start, and so does the whole run under ``make test``, which starts
pytest in it. The goldens were captured in it, so they mean the same on every x86-64 machine.
"""

from __future__ import annotations

import os

from bench.harness.arithmetic import pin_arithmetic

pin_arithmetic()

import pytest  # noqa: E402

from tests.helpers import SHARED_DATA  # noqa: E402


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


@pytest.fixture
def one_torch_thread():
    """Torch on one thread for the test, then as it was: small algebra gains nothing from
    more, and on a shared machine waiting threads make every step several times slower. A
    module takes it with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
