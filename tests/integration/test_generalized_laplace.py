"""Generalized Laplace Figures 2, 3 and 5a run end to end at smoke scale; reports render;
Figure 4's report says which files it needs."""

from __future__ import annotations

import math

import pytest

from bench.harness.jobs import execute
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from tests.helpers import compose_config


def smoke_record(experiment: str, results_dir, *overrides: str) -> dict:
    """One ok smoke-scale record with finite cells."""
    cfg = compose_config([f"experiment={experiment}", "scale=smoke", "seed=0", *overrides,
                          f"results_dir={results_dir}"])
    record = execute(cfg)
    assert record["status"] == "ok", record["traceback"]
    assert record["cells"] and all(math.isfinite(c["value"]) for c in record["cells"])
    return record


def test_toy_structures_report_their_predictive_spread(tmp_path):
    record = smoke_record("generalized_laplace/figure-2", tmp_path)
    rows = {c["row"] for c in record["cells"]}
    assert rows == {"Diag", "KFAC", "EKFAC", "B-Diag"}
    spread = {c["row"]: c["value"] for c in record["cells"] if c["column"] == "relu/mean_sd"}
    assert all(value > 0 for value in spread.values())
    assert len(record["arrays"]["Diag/sd"]) == len(record["arrays"]["x"])
    written = render_report(SPECS["generalized_laplace/figure-2"], [record], tmp_path / "out")
    assert any(path.suffix == ".png" for path in written)


@pytest.fixture(scope="module")
def tempered_records(tmp_path_factory) -> list[dict]:
    results = tmp_path_factory.mktemp("figure-3")
    return [smoke_record("generalized_laplace/figure-3", results, f"method.structure={s}")
            for s in ("diag", "kfac", "ekfac")]


def test_structures_share_one_stored_network(tempered_records):
    hashes = {r["fitted"]["recipe_hash"] for r in tempered_records}
    assert len(hashes) == 1
    assert [r["fitted"]["network_reused"] for r in tempered_records] == [False, True, True]
    assert len({r["metrics"]["map_test_accuracy"] for r in tempered_records}) == 1


def test_every_temperature_and_set_has_its_cells(tempered_records):
    record = tempered_records[0]
    temperatures = record["arrays"]["temperatures"]
    columns = {c["column"] for c in record["cells"]}
    for t in temperatures:
        assert f"mnist/accuracy@T={t:g}" in columns and f"kmnist/entropy@T={t:g}" in columns
    kfac = tempered_records[1]
    assert kfac["metrics"]["paper_like_last_layer_frobenius_norm"] > 0
    assert any(c["column"] == "hessian_frobenius_norm" for c in kfac["cells"])


def test_figure_3_and_5_reports_render(tempered_records, tmp_path):
    for key in ("generalized_laplace/figure-3", "generalized_laplace/figure-5"):
        written = render_report(SPECS[key], tempered_records, tmp_path)
        text = next(p for p in written if p.suffix == ".md").read_text()
        assert "## Anchors" in text
