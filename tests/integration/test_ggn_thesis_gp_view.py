"""GGN thesis Figure 5.6 end to end at smoke scale: the record's cells and arrays, the stored
network reused by a job with the same recipe and retrained for another delta, the report with its
figure and anchors, and bad input stopping with one line (exit 2, nothing written)."""

from __future__ import annotations

import math

import pytest

from bench.harness.job_execution import execute
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from bench.tasks.gp_explanations import CHECK_ROW, ROW
from tests.helpers import compose_config, config_error_line

EXPERIMENT = "ggn_thesis/figure-5.6"


def smoke_record(results, *overrides: str) -> dict:
    cfg = compose_config([f"experiment={EXPERIMENT}", "scale=smoke", "seed=0",
                          f"results_dir={results}", *overrides])
    done = execute(cfg)
    assert done["status"] == "ok", done["traceback"]
    return done


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return tmp_path_factory.mktemp("figure-5.6")


@pytest.fixture(scope="module")
def record(results) -> dict:
    return smoke_record(results)


@pytest.mark.second_tier
def test_the_stored_network_is_reused_and_delta_enters_its_recipe(record, results):
    same_network = smoke_record(results, "method.batch_size=7")
    assert same_network["fitted"]["network_reused"] is True
    assert same_network["fitted"]["recipe_hash"] == record["fitted"]["recipe_hash"]
    assert same_network["arrays"]["importances_sorted"] == pytest.approx(
        record["arrays"]["importances_sorted"], abs=1e-12)
    other_prior = smoke_record(results, "method.prior_precision=5")
    assert other_prior["fitted"]["recipe_hash"] != record["fitted"]["recipe_hash"]
    assert other_prior["fitted"]["network_reused"] is False


@pytest.mark.second_tier
def test_cells_hold_the_setup_and_the_diagnostics(record):
    cells = {(c["row"], c["column"]): c["value"] for c in record["cells"]}
    assert all(math.isfinite(v) for v in cells.values())
    assert cells[(ROW, "N_train")] == 48 and cells[(ROW, "P")] == 4587
    assert cells[(ROW, "conv_layers")] == 2 and cells[(ROW, "linear_layers")] == 3
    assert cells[(ROW, "delta")] == 10.0
    importances = record["arrays"]["importances_sorted"]
    assert len(importances) == 48 and importances == sorted(importances)
    assert cells[(ROW, "max_abs_residual")] == pytest.approx(max(abs(a) for a in importances))
    assert all(-1 < a < 1 for a in importances)
    for column in ("train_accuracy", "test_accuracy", "gp_sign_agreement"):
        assert 0 <= cells[(CHECK_ROW, column)] <= 1
    assert cells[(CHECK_ROW, "self_check_relative_error")] >= 0
    fitted = record["fitted"]
    assert cells[(CHECK_ROW, "gradient_norm")] == fitted["gradient_norm"] > 0
    assert record["metrics"]["map_objective"] == fitted["map_objective"] > 0
    assert record["fitted"]["n_params"] == 4587 and record["fitted"]["network_reused"] is False


def test_arrays_hold_every_image_the_figure_draws(record):
    arrays = record["arrays"]
    side = 28 * 28
    n_examples = len(arrays["examples/position"])
    assert len(arrays["examples/pixels"]) == n_examples * side
    # 6 lowest, 4 around the median, 6 highest of 48.
    assert arrays["examples/position"] == [0, 1, 2, 3, 4, 5, 22, 23, 24, 25, 42, 43, 44, 45,
                                           46, 47]
    n_tests, k = len(arrays["tests/index"]), int(arrays["neighbours/count"][0])
    assert 1 <= n_tests <= 3 and k == 8
    assert len(arrays["neighbours/pixels"]) == n_tests * k * side
    assert all(0 <= p <= 255 for p in arrays["tests/pixels"])
    kernel = arrays["neighbours/kernel"]
    for row in range(n_tests):
        values = kernel[row * k:(row + 1) * k]
        assert values == sorted(values, reverse=True)
    assert set(arrays["neighbours/label"]) <= {0, 1}


@pytest.mark.second_tier
def test_report_renders_the_figure_and_anchors(record, tmp_path):
    written = render_report(SPECS[EXPERIMENT], [record], tmp_path)
    assert any(path.suffix == ".png" for path in written)
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "## Anchors" in text and "self-check" in text and "max_abs_residual" in text


@pytest.mark.parametrize(("override", "expected"), [
    ("method.prior_precision=0", "method.prior_precision=0 is not valid; it must be a "
                                 "positive number"),
    ("method.prior_precision=-1", "method.prior_precision=-1 is not valid"),
    ("method.kernel=rbf", "method.kernel: no such config key"),
    ("dataset.classes=[4]", "dataset.classes=[4] is not valid"),
])
@pytest.mark.second_tier
def test_bad_input_is_one_line_exit_2_and_writes_nothing(override, expected, tmp_path, capsys,
                                                         monkeypatch):
    line = config_error_line([f"experiment={EXPERIMENT}", "scale=smoke", override], tmp_path,
                             capsys, monkeypatch)
    assert expected in line
    assert not (tmp_path / "ggn_thesis").exists() and not (tmp_path / "networks").exists()
