"""Laplace Redux Table 3 and Figure 9 end to end at smoke scale through ``bench.reproduce``;
reports render (EMNIST cells "needs data"); bad data settings stop with one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from bench.cli.reproduce_command import main as reproduce
from bench.harness.finished_jobs import apply_scale_overrides
from bench.harness.job_execution import execute
from bench.harness.overrides import group_options
from bench.harness.records import iter_records
from bench.models.classifiers import build_classifier
from bench.reporting.data_needs import missing_data
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from bench.tuning.recipe_choice import choose_recipe, scores_from_cells
from tests.helpers import REPO, assert_verdict_follows_fit_health, compose_config

# Every method of the table:
METHODS = ("method=map_classifier,classifier_ensemble,bayes_by_backprop,cyclical_sghmc,swag,"
           "laplace_classifier")
ROWS = {"MAP", "DE", "BBB", "CSGHMC", "SWAG", "LA", "LA*"}
# Figure 9's rotation angles at smoke scale (its config's scale_overrides).
SMOKE_ANGLES = (0, 60, 120, 180)


def records_of(results, artifact: str) -> list[dict]:
    return list(iter_records(results, f"laplace_redux/{artifact}", "smoke"))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Table 3 through ``bench.reproduce`` (one Hydra multirun), then Figure 9's jobs in this
    process (they must reuse Table 3's stored networks), at smoke scale."""
    folder = tmp_path_factory.mktemp("redux")
    status = reproduce(["laplace_redux/table-3", "--scale", "smoke", "--no-report",
                        "--no-side-runs", METHODS, f"results_dir={folder}"])
    assert status == 0
    for method in METHODS.split("=")[1].split(","):
        execute(compose_config(["experiment=laplace_redux/figure-9", "scale=smoke", "seed=6",
                                f"method={method}", f"results_dir={folder}"]))
    return folder


@pytest.mark.second_tier
def test_table_3_cells_are_the_stored_networks_confidences(results):
    records = records_of(results, "table-3")
    assert {r["status"] for r in records} == {"ok"} and len(records) == 6
    cells = {(c["row"], c["column"]): c["value"] for r in records for c in r["cells"]}
    assert {row for row, _ in cells} == ROWS
    assert not any(column.endswith("_emnist") for _, column in cells)
    assert all(0.1 <= cells[(row, f"conf_{s}")] <= 1.0 for row in ROWS
               for s in ("fmnist", "kmnist", "mnist"))
    assert all(0.0 <= cells[(row, f"auroc_{s}")] <= 1.0 for row in ROWS
               for s in ("fmnist", "kmnist"))
    map_record = next(r for r in records if r["method"] == "MAP")
    assert "emnist_digits_torchvision" in map_record["fitted"]["ood_needs_data"]
    # MAP's FMNIST confidence by hand: the stored network's softmax on the same 40 images.
    cfg = compose_config(["experiment=laplace_redux/table-3", "scale=smoke", "seed=6"])
    data = instantiate(map_record["config"]["dataset"] | {"_target_": cfg.dataset._target_})
    network = build_classifier("lenet_redux", torch.Generator())
    network.load_state_dict(torch.load(f"{map_record['fitted']['network_path']}/weights.pt"))
    with torch.no_grad():
        probs = torch.softmax(network.eval()(data.ood_set("fashion_mnist", 6).x), dim=-1)
    assert cells[("MAP", "conf_fmnist")] == pytest.approx(
        float(probs.max(dim=-1).values.double().mean()), rel=1e-6)
    la = next(r for r in records if "LA" in r["fitted"]["methods"])  # rows LA and LA*
    for row in ("LA", "LA*"):
        assert la["timings"][f"{row}/predict_s"] > 0 and la["timings"][f"{row}/map_predict_s"] > 0
        assert la["fitted"]["methods"][row]["prior_precision"] > 0
        assert cells[(row, "prior_precision")] == la["fitted"]["methods"][row]["prior_precision"]
    assert la["fitted"]["methods"]["LA"]["laplace_class"] == "KronLLLaplace"


@pytest.mark.second_tier
def test_figure_9_records_every_rows_health_on_the_least_shifted_images(results):
    """Figure 9's input sets are named by shift level, so health is taken on the least
    shifted one (its records had none before): finite NLL and accuracy against chance."""
    for record in records_of(results, "figure-9"):
        rows = {c["row"] for c in record["cells"]}
        assert rows and set(record["health"]) == rows
        for health in record["health"].values():
            assert "finite" in health["checks"] and len(health["checks"]) >= 2


@pytest.mark.second_tier
def test_figure_9_reuses_the_table_3_networks(results):
    table = {r["method"]: r for r in records_of(results, "table-3")}
    records = records_of(results, "figure-9")
    assert {r["status"] for r in records} == {"ok"} and len(records) == 6
    assert all(r["fitted"]["network_reused"] for r in records)
    # Nothing retrains: the trained methods load their stored states and DE its members.
    methods = {row: d for r in records for row, d in r["fitted"]["methods"].items()}
    assert all(methods[row]["state_reused"] for row in ("BBB", "CSGHMC", "SWAG"))
    assert methods["DE"]["members_trained_now"] == []
    assert {r["fitted"]["recipe_hash"] for r in records} == \
        {table["MAP"]["fitted"]["recipe_hash"]}
    assert records[0]["arrays"]["levels"] == [float(a) for a in SMOKE_ANGLES]
    for record in records:
        cells = {(c["row"], c["column"]): c["value"] for c in record["cells"]}
        source = {(c["row"], c["column"]): c["value"] for c in table[record["method"]]["cells"]}
        for row in {row for row, _ in cells}:
            # Angle 0 is Table 3's test part, with the same network (and the same LA refit).
            assert cells[(row, "angle=0/accuracy")] == pytest.approx(
                source[(row, "acc_mnist")], abs=1e-12)
            assert cells[(row, "angle=0/nll")] == pytest.approx(source[(row, "nll_mnist")],
                                                                rel=1e-5)
            assert all(f"angle={a}/brier" in {c for _, c in cells} for a in SMOKE_ANGLES)


@pytest.mark.second_tier
def test_reports_render_with_emnist_needing_data(results, tmp_path):
    table_3 = records_of(results, "table-3")
    written = render_report(SPECS["laplace_redux/table-3"], table_3, tmp_path)
    frame = pd.read_csv(next(p for p in written if p.suffix == ".csv"))
    emnist = frame[frame["column"].str.endswith("_emnist")]
    assert len(emnist) == 7 * 2 and set(emnist["verdict"]) == {"needs data"}
    for expected in ("emnist-digits-test-images-idx3-ubyte.gz", "in $BENCH_DATA_DIR/emnist/"):
        assert emnist["cause"].str.contains(expected, regex=False).all()
    la = frame[(frame["row"] == "LA") & (frame["column"] == "conf_fmnist")].iloc[0]
    assert la["paper"] == 58.8
    assert_verdict_follows_fit_health(la, table_3, "LA")
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "ours mean ± SE" in text and "prediction time LA / MAP" in text
    written = render_report(SPECS["laplace_redux/figure-9"], records_of(results, "figure-9"),
                            tmp_path)
    assert any(p.suffix == ".png" for p in written)
    assert "## Anchors" in next(p for p in written if p.suffix == ".md").read_text()


def run_job(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.run", "experiment=laplace_redux/table-3",
                           "scale=smoke", *overrides], cwd=REPO, capture_output=True, text=True)


@pytest.mark.second_tier
def test_missing_in_distribution_files_stop_with_one_line(tmp_path):
    done = run_job(f"dataset.root={tmp_path}", f"results_dir={tmp_path / 'results'}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(
        "error: image data set 'mnist' (train and test splits) not found: put "
        "train-images-idx3-ubyte.gz")
    assert not (tmp_path / "results" / "laplace_redux").exists()


@pytest.mark.second_tier
def test_unknown_ood_set_stops_with_one_line_naming_dataset_ood(tmp_path):
    done = run_job("dataset.ood=[fashion_mnist,emnist_letters]", f"results_dir={tmp_path}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(
        "error: dataset.ood='emnist_letters' is not valid; choose one of: mnist, fashion_mnist")


@pytest.mark.second_tier
def test_cifar10c_panel_runs_on_generated_files_and_needs_data_here(tmp_path, monkeypatch):
    from tests.unit.datasets.image_fixtures import write_cifar, write_cifar10_c

    rng = np.random.default_rng(0)
    write_cifar(tmp_path / "data" / "cifar10" / "cifar-10-batches-py", rng, per_file=12)
    for corruption in ("snow", "fog"):
        write_cifar10_c(tmp_path / "data" / "cifar10_c", corruption, per_severity=12)
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    cfg = compose_config(["experiment=laplace_redux/figure-9-cifar10c", "scale=smoke",
                          "seed=6", "method=map_classifier", f"results_dir={tmp_path / 'r'}"])
    record = execute(cfg)
    assert record["status"] == "ok", record["traceback"]
    assert record["arrays"]["levels"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert json.loads(json.dumps(record["config"]["network"]["model"])) == {
        "name": "wrn16_4", "options": {"dropout": 0.3, "widen": 1}}
    columns = {c["column"] for c in record["cells"]}
    assert {f"severity={s}/brier" for s in range(6)} <= columns
    lines = missing_data(SPECS["laplace_redux/figure-9-cifar10c"], tmp_path / "empty")
    assert lines and "cifar-10-batches-py" in lines[0]
    # The baselines that build their own network build the WRN stand-in, not the LeNet.
    for method in ("bayes_by_backprop", "cyclical_sghmc", "swag"):
        record = execute(compose_config(["experiment=laplace_redux/figure-9-cifar10c",
                                         "scale=smoke", "seed=6", f"method={method}",
                                         f"results_dir={tmp_path / 'r'}"]))
        assert record["status"] == "ok", record["traceback"]


@pytest.mark.second_tier
def test_paper_scale_runs_swag_at_the_authors_seed_only():
    from bench.cli.reproduce_command import sweep_overrides

    for artifact in ("table-3", "figure-9"):
        main, swag = sweep_overrides(f"laplace_redux/{artifact}", "paper", [])
        assert main[2:] == ["seed=6,12,13,523,972394",
                            "method=bayes_by_backprop,classifier_ensemble,cyclical_sghmc,"
                            "laplace_classifier,map_classifier"]
        assert swag[2:] == ["seed=6", "method=swag"]
    assert sweep_overrides("laplace_redux/table-3", "smoke", [METHODS])[0][2:] == [
        "seed=6", METHODS]


@pytest.mark.second_tier
def test_map_recipe_study_trains_table_3_networks_with_its_recipe():
    """At cpu scale the study's adam_b128 network is Table 3's (one stored network)."""
    study = apply_scale_overrides(compose_config(
        ["experiment=laplace_redux/map-recipe", "scale=cpu", "map_recipe=adam_b128"]), [])
    table = apply_scale_overrides(compose_config(
        ["experiment=laplace_redux/table-3", "scale=cpu"]), [])
    resolved = [OmegaConf.to_container(cfg.network, resolve=True) for cfg in (study, table)]
    assert resolved[0] == resolved[1]
    other = apply_scale_overrides(compose_config(
        ["experiment=laplace_redux/map-recipe", "scale=cpu", "map_recipe=sgd_nesterov_b512"]),
        [])
    stage = OmegaConf.to_container(other.network, resolve=True)["stages"][0]
    assert (stage["optimizer"], stage["lr"], stage["nesterov"], stage["epochs"]) == \
        ("sgd", 0.1, True, 100)


@pytest.mark.second_tier
def test_map_recipe_rows_name_the_recipe_and_hold_the_learned_prior_precision(tmp_path):
    cfg = compose_config(["experiment=laplace_redux/map-recipe", "scale=smoke", "seed=6",
                          "map_recipe=sgd_nesterov_b512", "method=laplace_classifier",
                          f"results_dir={tmp_path}"])
    record = execute(cfg)
    assert record["status"] == "ok"
    cells = {(c["row"], c["column"]): c["value"] for c in record["cells"]}
    assert {row for row, _ in cells} == {"sgd_nesterov_b512 / LA", "sgd_nesterov_b512 / LA*"}
    for row in ("LA", "LA*"):
        assert cells[(f"sgd_nesterov_b512 / {row}", "prior_precision")] == pytest.approx(
            record["fitted"]["methods"][row]["prior_precision"])
    assert record["config"]["network"]["stages"][0]["optimizer"] == "sgd"


@pytest.mark.second_tier
def test_recipe_selection_record_holds_every_candidate_and_the_rules_choice(tmp_path):
    """The selection job scores every conf/map_recipe candidate on the held-out part of the
    training set and records the choice the rule makes from those scores alone."""
    cfg = compose_config(["experiment=laplace_redux/map-recipe-selection", "scale=smoke",
                          "seed=6", f"results_dir={tmp_path}"])
    record = execute(cfg)
    assert record["status"] == "ok"
    cells = {(c["row"], c["column"]): c["value"] for c in record["cells"]}
    candidates = set(cfg.selection.candidates)
    assert candidates == set(group_options()["map_recipe"])
    assert {row for row, column in cells if column == "val_nll"} == candidates
    choice = choose_recipe(scores_from_cells(cells), text=cfg.selection.text,
                           code=cfg.selection.code)
    assert record["fitted"]["choice"] == choice.to_dict()
    assert [row for row in candidates if cells[(row, "chosen")] == 1.0] == [choice.chosen]
    assert cells[(choice.chosen, "nll_gap_to_chosen")] == 0.0
    assert all(cells[(row, "nll_gap_to_chosen")] == pytest.approx(
        cells[(row, "val_nll")] - cells[(choice.chosen, "val_nll")]) for row in candidates)
    split = record["fitted"]["split"]
    assert split["fit_size"] + split["val_size"] == record["config"]["dataset"]["n_train"]


def test_table_3_trains_the_recipe_the_selection_rule_chose():
    """Table 3's MAP recipe is the one the committed selection report marks as chosen."""
    table = pd.read_csv(REPO / "reports/laplace_redux/map-recipe-selection.csv")
    chosen = table[(table["column"] == "chosen") & (table["ours"] == 1.0)]["row"].tolist()
    cfg = apply_scale_overrides(compose_config(["experiment=laplace_redux/table-3",
                                                "scale=cpu"]), [])
    assert chosen == [cfg.map_recipe.name]
