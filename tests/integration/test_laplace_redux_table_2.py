"""Laplace Redux Table 2 end to end at smoke scale through ``bench.reproduce``, on the shared
Fashion-MNIST / MNIST / KMNIST files or on generated ones in the same formats: cells, the
learned prior precisions in the records, a cell recomputed from the stored state, the report
with EMNIST needing data, bad input stopping with one line (exit 2) before anything is
written."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from bench.cli.reproduce_command import main as reproduce
from bench.datasets.training_set import TrainingSet
from bench.harness.finished_jobs import apply_scale_overrides
from bench.harness.method_nodes import instantiate_method
from bench.harness.records import iter_records
from bench.jobs.classification_runner import configured_method_node
from bench.metrics.classification_scores import nll
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from tests.helpers import REPO, SHARED_DATA, assert_verdict_follows_fit_health, compose_config

# row -> (laplace-torch class, number of prior precisions); smoke FULL is the last-layer stand-in.
STRUCTURES = {"LA/DIAG": ("DiagLaplace", 10), "LA/KFAC": ("KronLaplace", 10),
              "LA/FULL": ("FullLLLaplace", 1)}
SETS = ("fashion_mnist", "mnist", "kmnist")
# Test and OOD images per set at smoke scale (conf/experiment/laplace_redux/table-2.yaml).
SMOKE_TEST_IMAGES = 10


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The shared data when the session uses it, else generated IDX / npz files whose test sets
    have 10,000 images (the 2k / 8k split needs more than 2,000)."""
    if os.environ.get("BENCH_DATA_DIR") == str(SHARED_DATA):
        yield str(SHARED_DATA)
        return
    from tests.unit.datasets.image_fixtures import write_kmnist_npz, write_mnist_like

    root = tmp_path_factory.mktemp("table-2-data")
    rng = np.random.default_rng(0)
    write_mnist_like(root / "fashion_mnist", rng, sizes=(300, 10000))
    write_mnist_like(root / "mnist", rng, sizes=(64, 10000))
    write_kmnist_npz(root / "kmnist", rng, sizes=(64, 10000))
    before = os.environ.get("BENCH_DATA_DIR")
    os.environ["BENCH_DATA_DIR"] = str(root)
    yield str(root)
    if before is None:
        del os.environ["BENCH_DATA_DIR"]
    else:
        os.environ["BENCH_DATA_DIR"] = before


@pytest.fixture(scope="module")
def results(data_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("redux-table-2")
    assert reproduce(["laplace_redux/table-2", "--scale", "smoke", "--no-report",
                      "--no-side-runs", f"results_dir={folder}"]) == 0
    return folder


def records_of(results) -> dict[str, dict]:
    return {r["method"]: r for r in iter_records(results, "laplace_redux/table-2", "smoke")}


@pytest.mark.second_tier
def test_each_structure_has_its_cells_and_its_learned_prior(results):
    records = records_of(results)
    assert set(records) == set(STRUCTURES)
    for row, (laplace_class, n_prior) in STRUCTURES.items():
        record = records[row]
        assert record["status"] == "ok", record["traceback"]
        assert record["config"]["method"]["name"] == row and record["seed"] == 711
        cells = {c["column"]: c["value"] for c in record["cells"]}
        assert {c["row"] for c in record["cells"]} == {row}
        assert set(cells) == {"test_loglik", "test_acc", "auroc_mnist", "auroc_kmnist",
                              "ood_auroc_avg", "pred_time"}
        assert cells["test_loglik"] < 0 and 0 <= cells["test_acc"] <= 1
        assert cells["ood_auroc_avg"] == pytest.approx(
            (cells["auroc_mnist"] + cells["auroc_kmnist"]) / 2, rel=1e-12)
        seconds = [record["timings"][f"{row}/predict_s/{name}"] for name in SETS]
        assert cells["pred_time"] == pytest.approx(sum(seconds) / 3, rel=1e-12)
        fitted = record["fitted"]["methods"][row]
        assert fitted["laplace_class"] == laplace_class and fitted["backend"] == "AsdlGGN"
        assert len(fitted["prior_precision"]) == n_prior
        assert all(p > 0 for p in fitted["prior_precision"])
        assert fitted["epochs"] == 2 and fitted["marglik_updates"] == 2
        assert fitted["best_neg_log_marglik"] == min(fitted["neg_log_marglik_per_update"])
        assert record["fitted"]["ood_sets"] == ["mnist", "kmnist"]
        assert "emnist_digits_torchvision" in record["fitted"]["ood_needs_data"]
        assert record["fitted"]["set_sizes"] == {name: SMOKE_TEST_IMAGES for name in SETS}


@pytest.mark.second_tier
def test_the_test_log_likelihood_is_the_stored_states_predictive(results):
    record = records_of(results)["LA/KFAC"]
    cfg = apply_scale_overrides(compose_config([
        "experiment=laplace_redux/table-2", "scale=smoke", "seed=711",
        "method=online_marglik_kron", f"results_dir={results}"]), [])
    data = instantiate(record["config"]["dataset"] | {"_target_": cfg.dataset._target_})
    splits = data.splits(711)
    method = instantiate_method(configured_method_node(cfg))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diagnostics = method.fit(TrainingSet(splits.x_train, splits.y_train, data.images,
                                             data.normalisation, str(results)), 711)
        predictive = method.predict(splits.x_test)
    assert diagnostics["state_reused"]
    assert diagnostics["prior_precision"] == record["fitted"]["methods"]["LA/KFAC"][
        "prior_precision"]
    cells = {c["column"]: c["value"] for c in record["cells"]}
    assert -nll(predictive, splits.y_test) == pytest.approx(cells["test_loglik"], rel=1e-6)


@pytest.mark.second_tier
def test_the_report_prints_the_paper_beside_ours_and_the_time_ratios(results, tmp_path):
    records = list(records_of(results).values())
    written = render_report(SPECS["laplace_redux/table-2"], records, tmp_path)
    frame = pd.read_csv(next(p for p in written if p.suffix == ".csv"))
    paper = frame.dropna(subset=["paper"])
    assert len(paper) == 12
    diag = paper[(paper["row"] == "LA/DIAG") & (paper["column"] == "test_acc")].iloc[0]
    assert diag["paper"] == 0.894
    assert_verdict_follows_fit_health(diag, records, "LA/DIAG")
    full = paper[(paper["row"] == "LA/FULL") & (paper["column"] == "ood_auroc_avg")].iloc[0]
    assert full["verdict"] == "not comparable" and "stand-in" in full["cause"]
    seconds = paper[paper["column"] == "pred_time"]
    assert set(seconds["verdict"]) == {"not comparable"}
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "prediction time KFAC / DIAG" in text and "last-layer stand-in" in text


def test_the_budget_side_runs_change_one_factor_of_the_cpu_budget_each():
    base = apply_scale_overrides(compose_config(
        ["experiment=laplace_redux/table-2", "scale=cpu", "method=online_marglik_diag"]), [])
    for budget, changed in (("e100_r5k", {"epochs": 100}), ("e50_r20k", {"refit_size": 20000})):
        side = apply_scale_overrides(compose_config(
            ["experiment=laplace_redux/table-2-budget", "scale=cpu", f"marglik_budget={budget}",
             "method=online_marglik_diag"]), [])
        method = OmegaConf.to_container(side.method, resolve=True)
        assert method == {**OmegaConf.to_container(base.method, resolve=True), **changed}
        assert side.name == base.name and side.seed == base.seed
        assert OmegaConf.to_container(side.dataset, resolve=True) == \
            OmegaConf.to_container(base.dataset, resolve=True)


@pytest.mark.second_tier
def test_the_budget_side_runs_join_table_2s_records_with_their_own_rows(data_dir, tmp_path):
    assert reproduce(["laplace_redux/table-2-budget", "--scale", "smoke", "--no-report",
                      f"results_dir={tmp_path}"]) == 0
    records = list(iter_records(tmp_path, "laplace_redux/table-2", "smoke"))
    rows = {c["row"] for r in records for c in r["cells"]}
    assert rows == {"LA/DIAG (100 epochs, 5k refits)", "LA/DIAG (50 epochs, 20k refits)"}
    assert {r["status"] for r in records} == {"ok"}
    frame = pd.read_csv(next(p for p in render_report(SPECS["laplace_redux/table-2"], records,
                                                      tmp_path / "reports")
                             if p.suffix == ".csv"))
    side = frame[(frame["row"] == "LA/DIAG (100 epochs, 5k refits)")
                 & (frame["column"] == "test_acc")].iloc[0]
    assert side["paper"] == 0.894


def run_job(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.run", "experiment=laplace_redux/table-2",
                           "scale=smoke", *overrides], cwd=REPO, capture_output=True, text=True)


@pytest.mark.second_tier
@pytest.mark.parametrize(("override", "message"), [
    ("method.prior_precision=0", "error: method.prior_precision=0 is not valid; it must be a "
                                 "positive number"),
    ("method.prior_precision=-30", "error: method.prior_precision=-30 is not valid"),
    ("method.hessian_structure=lowrank", "error: method.hessian_structure='lowrank' is not "
                                         "valid; choose one of: diag, kron, full"),
])
def test_bad_input_stops_with_one_line_and_writes_nothing(data_dir, tmp_path, override,
                                                          message):
    done = run_job(override, f"results_dir={tmp_path}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(message)
    assert not (tmp_path / "laplace_redux").exists() and not (tmp_path / "states").exists()
