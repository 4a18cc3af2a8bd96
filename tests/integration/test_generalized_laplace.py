"""Generalized Laplace Figures 2, 3 and 5a run end to end at smoke scale; reports render;
Figure 4's report says which files it needs."""

from __future__ import annotations

import math

import pytest

from bench.harness.job_execution import execute
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


@pytest.mark.second_tier
def test_toy_structures_report_their_predictive_spread(tmp_path):
    record = smoke_record("generalized_laplace/figure-2", tmp_path)
    rows = {c["row"] for c in record["cells"]}
    structures = {"Diag", "KFAC", "EKFAC", "B-Diag"}
    assert rows == structures | {f"{row} (paper-like)" for row in structures}
    assert record["fitted"]["KFAC (paper-like)"]["accumulation"] == "paper-like"
    spread = {c["row"]: c["value"] for c in record["cells"] if c["column"] == "relu/mean_sd"}
    assert all(value > 0 for value in spread.values())
    assert len(record["arrays"]["Diag/sd"]) == len(record["arrays"]["x"])
    written = render_report(SPECS["generalized_laplace/figure-2"], [record], tmp_path / "out")
    assert any(path.suffix == ".png" for path in written)


POSTERIORS = ("Diag", "KFAC", "EKFAC", "KFAC-paper-like")


@pytest.fixture(scope="module")
def tempered_records(tmp_path_factory) -> list[dict]:
    results = tmp_path_factory.mktemp("figure-3")
    return [smoke_record("generalized_laplace/figure-3", results, f"posterior={p}")
            for p in POSTERIORS]


@pytest.mark.second_tier
def test_structures_share_one_stored_network(tempered_records):
    hashes = {r["fitted"]["recipe_hash"] for r in tempered_records}
    assert len(hashes) == 1
    assert [r["fitted"]["network_reused"] for r in tempered_records] == [False, True, True,
                                                                          True]
    assert len({r["metrics"]["map_test_accuracy"] for r in tempered_records}) == 1


@pytest.mark.second_tier
def test_every_temperature_and_set_has_its_cells(tempered_records):
    record = tempered_records[0]
    temperatures = record["arrays"]["temperatures"]
    columns = {c["column"] for c in record["cells"]}
    for t in temperatures:
        assert f"mnist/accuracy@T={t:g}" in columns and f"kmnist/entropy@T={t:g}" in columns
    kfac = tempered_records[1]
    assert kfac["metrics"]["paper_like_last_layer_frobenius_norm"] > 0
    assert any(c["column"] == "hessian_frobenius_norm" for c in kfac["cells"])


@pytest.mark.second_tier
def test_paper_like_kfac_is_its_own_row_through_the_sweep(tempered_records):
    exact, paper_like = tempered_records[1], tempered_records[3]
    assert paper_like["fitted"]["accumulation"] == "paper-like"
    assert {c["row"] for c in paper_like["cells"]} == {"KFAC (paper-like)"}
    assert len(paper_like["arrays"]["KFAC (paper-like)/mnist/entropy"]) == len(
        paper_like["arrays"]["temperatures"])
    # same network, curvature and draws: the same norms, other curves
    assert paper_like["metrics"] == exact["metrics"]
    assert paper_like["arrays"]["KFAC (paper-like)/mnist/entropy"] != exact["arrays"][
        "KFAC/mnist/entropy"]


@pytest.mark.second_tier
def test_every_structure_records_both_last_layer_norms(tempered_records):
    for record in tempered_records[:3]:
        row = record["variant"]
        norms = {c["column"]: c["value"] for c in record["cells"] if c["row"] == row
                 and "frobenius" in c["column"]}
        assert set(norms) == {"last_layer_frobenius_norm",
                              "paper_like_last_layer_frobenius_norm"}
        assert all(value > 0 for value in norms.values())


@pytest.mark.second_tier
def test_figure_3_and_5_reports_render(tempered_records, tmp_path):
    for key in ("generalized_laplace/figure-3", "generalized_laplace/figure-5"):
        written = render_report(SPECS[key], tempered_records, tmp_path)
        text = next(p for p in written if p.suffix == ".md").read_text()
        assert "## Anchors" in text


@pytest.fixture(scope="module")
def resnet_records(tmp_path_factory) -> list[dict]:
    """Figure 4 at smoke scale for the three structures, on CIFAR-10 pickles and an SVHN
    ``test_32x32.mat`` written into a temporary data root."""
    import numpy as np

    from tests.unit.datasets.image_fixtures import write_cifar, write_svhn

    root = tmp_path_factory.mktemp("cifar-data")
    rng = np.random.default_rng(0)
    write_cifar(root / "cifar10" / "cifar-10-batches-py", rng, per_file=8)
    write_svhn(root / "svhn", rng, n=12)
    results = tmp_path_factory.mktemp("figure-4")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENCH_DATA_DIR", str(root))
        return [smoke_record("generalized_laplace/figure-4", results, f"method.structure={s}")
                for s in ("diag", "kfac", "ekfac")]


@pytest.mark.second_tier
def test_resnet_structures_share_one_stored_network_and_leave_batchnorm_out(resnet_records):
    assert len({r["fitted"]["recipe_hash"] for r in resnet_records}) == 1
    assert [r["fitted"]["network_reused"] for r in resnet_records] == [False, True, True]
    # Width-8 ResNet-18: 177,362 parameters, of which 1,200 in batch norm (9,600 / 8).
    assert {r["fitted"]["n_params"] for r in resnet_records} == {177_362 - 1_200}
    assert all(r["fitted"]["initial_weights"].startswith("trained from scratch")
               for r in resnet_records)
    record = resnet_records[0]
    columns = {c["column"] for c in record["cells"]}
    for t in record["arrays"]["temperatures"]:
        assert f"cifar10/accuracy@T={t:g}" in columns and f"svhn/entropy@T={t:g}" in columns


@pytest.mark.second_tier
def test_figure_4_and_5b_reports_render(resnet_records, tmp_path):
    for key in ("generalized_laplace/figure-4", "generalized_laplace/figure-5b"):
        written = render_report(SPECS[key], resnet_records, tmp_path)
        text = next(p for p in written if p.suffix == ".md").read_text()
        assert "## Anchors" in text and "needs data" not in text
