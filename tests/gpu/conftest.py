"""The GPU tier (``make test-gpu``): the ``gpu`` marker, the skip without a CUDA device, and the
session's data root.

Tests marked ``gpu`` run only where the tier's device exists (``tests/gpu/device_runs.py``);
elsewhere each is skipped with the same one-line reason, before any fixture is built.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.gpu.data_root import DataRoot, build_data_root
from tests.helpers import SHARED_DATA

# The data root as the user gave it, read before the session's own ``data_root`` fixture
# (tests/conftest.py) points BENCH_DATA_DIR at the shared or generated files.
USER_DATA_DIR = os.environ.get("BENCH_DATA_DIR") or None
MARKER = "gpu: compares a run on the GPU with the CPU run (make test-gpu; skipped without CUDA)"


def pytest_configure(config):
    """Register the ``gpu`` marker unless pyproject.toml already does."""
    if not any(line.split(":", 1)[0].strip() == "gpu" for line in config.getini("markers")):
        config.addinivalue_line("markers", MARKER)


def pytest_collection_modifyitems(config, items):
    """Skip every ``gpu`` test, with one reason, when the tier's device is missing."""
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    from tests.gpu.device_runs import missing_device_reason

    reason = missing_device_reason()
    if reason:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=reason))


def real_data_source() -> Path | None:
    """Where the real data are: ``$BENCH_DATA_DIR`` as the user set it, else the shared data
    next to the checkout when present, else nowhere (every data set generated)."""
    if USER_DATA_DIR:
        return Path(USER_DATA_DIR)
    return SHARED_DATA if SHARED_DATA.is_dir() else None


@pytest.fixture(scope="session")
def tier_data(tmp_path_factory) -> DataRoot:
    """One data root for every run of the session: the real files linked where present,
    generated ones in the real formats elsewhere (tests/gpu/data_root.py)."""
    return build_data_root(tmp_path_factory.mktemp("gpu-tier-data"), real_data_source())
