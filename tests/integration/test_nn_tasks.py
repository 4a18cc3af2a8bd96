"""Every network method of SSLA Table 2 runs end to end at smoke scale, deterministically."""

from __future__ import annotations

import math

import pytest

from bench.harness.jobs import execute
from tests.helpers import compose_config

METHODS = ["nn_assla", "nn_ssla", "la", "plugin", "mfvi", "vi", "hmc", "deep_ensemble"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("protocol", ["paper", "corrected"])
def test_method_runs_at_smoke_scale(method, protocol, tmp_path):
    cfg = compose_config(["experiment=ssla/table-2", "scale=smoke", f"method={method}",
                          f"protocol={protocol}", f"results_dir={tmp_path}"])
    record = execute(cfg)
    assert record["status"] == "ok", record["traceback"]
    rows = {cell["row"] for cell in record["cells"]}
    assert rows == set(cfg.method.variants)
    columns = {cell["column"] for cell in record["cells"]}
    assert {"cov95", "cov90", "cov75", "cov50", "nll", "crps", "rmse"} <= columns
    assert all(math.isfinite(cell["value"]) for cell in record["cells"])
    for row in rows:
        assert all(sd > 0 for sd in record["arrays"][f"{row}/sd"])


def test_same_seed_gives_the_same_network_record(tmp_path):
    overrides = ["experiment=ssla/table-2", "scale=smoke", "method=nn_ssla", "protocol=paper"]
    first = execute(compose_config([*overrides, f"results_dir={tmp_path / 'a'}"]))
    second = execute(compose_config([*overrides, f"results_dir={tmp_path / 'b'}"]))
    assert first["cells"] == second["cells"]
