"""Laplace Redux Figure 10 at smoke scale: every (data set, method) job on generated files in
the five WILDS layouts with generated checkpoints of the stand-in networks; cells checked by
hand from the checkpoints; the report renders; bad input stops with one line, exit code 2."""

from __future__ import annotations

import sys

import pytest
import torch
from hydra.utils import instantiate

from bench.cli.reproduce_command import sweep_overrides
from bench.harness.job_execution import execute
from bench.harness.records import iter_records
from bench.reporting.data_needs import missing_data
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from tests.helpers import compose_config
from tests.wilds_fixtures import wilds_checkpoint, write_benchmark

DATASETS = ("camelyon17", "fmow", "civilcomments", "amazon", "poverty")
METHODS = ("wilds_map", "wilds_temperature_scaling", "wilds_ensemble", "wilds_laplace")
SPEC = SPECS["laplace_redux/figure-10"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """Generated data and checkpoints, and the 20 smoke jobs of seed 0 (run in this process)."""
    root = tmp_path_factory.mktemp("wilds")
    write_benchmark(root / "data", root / "checkpoints")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENCH_DATA_DIR", str(root / "data"))
        patch.setenv("BENCH_WILDS_CHECKPOINTS", str(root / "checkpoints"))
        for dataset in DATASETS:
            for method in METHODS:
                execute(compose_config(["experiment=laplace_redux/figure-10", "scale=smoke",
                                        "seed=0", f"dataset=wilds_{dataset}",
                                        f"method={method}", f"results_dir={root / 'results'}"]))
        yield root, list(iter_records(root / "results", "laplace_redux/figure-10", "smoke"))


def cells_of(record: dict) -> dict[str, float]:
    return {c["column"]: c["value"] for c in record["cells"]}


def find(records, dataset: str, method: str) -> dict:
    return next(r for r in records if r["config"]["dataset"]["wilds_name"] == dataset
                and r["method"] == method)


@pytest.mark.second_tier
def test_every_job_is_ok_with_the_cells_of_its_task(bench):
    _, records = bench
    assert len(records) == 20 and {r["status"] for r in records} == {"ok"}
    classification = {f"{s}/{m}" for s in ("id", "ood") for m in (
        "accuracy", "confidence", "nll", "ece", "mce", "ece_paper", "brier")}
    for record in records:
        dataset = record["config"]["dataset"]["wilds_name"]
        columns = set(cells_of(record))
        assert {c["row"] for c in record["cells"]} <= {f"{dataset}/{record['method']}"}
        if dataset != "poverty":
            assert columns == classification
        elif record["method"] == "TS":
            assert columns == set() and "regression" in record["fitted"]["not_applicable"]
        else:
            assert columns == {f"{s}/{m}" for s in ("id", "ood")
                               for m in ("mse", "nll", "calibration")}
    la = find(records, "fmow", "LA")["fitted"]
    assert la["method"]["laplace_class"] == "KronLLLaplace" and la["stand_in"]
    assert la["method"]["prior_precision"] == 29.0 and la["method"]["n_samples"] == 50
    assert find(records, "camelyon17", "LA")["fitted"]["method"]["laplace_class"] == \
        "FullLLLaplace"


@pytest.mark.second_tier
def test_splits_follow_the_fallbacks(bench):
    _, records = bench
    splits = {r["config"]["dataset"]["wilds_name"]: r["fitted"]["splits"] for r in records
              if r["method"] == "MAP"}
    assert splits["camelyon17"]["id_test"] == "id_val"
    assert splits["civilcomments"] == {"train": "train", "validation": "train",
                                       "id_test": "train", "ood_test": "test"}
    assert splits["fmow"]["validation"] == "id_val" and splits["amazon"]["id_test"] == "id_test"
    assert find(records, "poverty", "MAP")["fitted"]["fold"] == "A"


def job_of(root, dataset: str):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENCH_DATA_DIR", str(root / "data"))
        patch.setenv("BENCH_WILDS_CHECKPOINTS", str(root / "checkpoints"))
        cfg = compose_config(["experiment=laplace_redux/figure-10", "scale=smoke", "seed=0",
                              f"dataset=wilds_{dataset}"])
        cfg.dataset.use_stand_in = True
        return instantiate(cfg.dataset).for_seed(0)


@pytest.mark.second_tier
def test_map_and_temperature_cells_by_hand(bench):
    root, records = bench
    job = job_of(root, "camelyon17")
    network = job.network("ERM")
    with torch.no_grad():
        logits = torch.cat([network(x) for x, _ in job.loader("ood_test")]).double()
    labels = job.targets("ood_test")
    probs = torch.softmax(logits, dim=-1)
    cells = cells_of(find(records, "camelyon17", "MAP"))
    assert cells["ood/accuracy"] == pytest.approx(float((probs.argmax(1) == labels)
                                                        .double().mean()), abs=1e-12)
    assert cells["ood/nll"] == pytest.approx(
        float(torch.nn.functional.cross_entropy(logits, labels)), rel=1e-9)
    ts = find(records, "camelyon17", "TS")
    scaled = torch.softmax(logits / ts["fitted"]["method"]["temperature"], dim=-1)
    assert cells_of(ts)["ood/confidence"] == pytest.approx(float(scaled.max(1).values.mean()),
                                                           rel=1e-9)


@pytest.mark.second_tier
def test_poverty_ensemble_and_laplace_by_hand(bench):
    root, records = bench
    job = job_of(root, "poverty")
    keys = list(job.data.checkpoints)
    with torch.no_grad():
        outputs = torch.stack([torch.cat([job.network(k)(x) for x, _ in job.loader("ood_test")])
                               .reshape(-1).double() for k in keys])
    y = job.targets("ood_test").double()
    de = find(records, "poverty", "DE")
    sigma = de["fitted"]["method"]["noise_sd"]
    mean, variance = outputs.mean(0), outputs.var(0, unbiased=True) + sigma**2
    nll = 0.5 * (torch.log(2 * torch.pi * variance) + (y - mean) ** 2 / variance)
    assert cells_of(de)["ood/nll"] == pytest.approx(float(nll.mean()), rel=1e-6)
    assert cells_of(de)["ood/mse"] == pytest.approx(float(((y - mean) ** 2).mean()), rel=1e-9)
    la, map_ = find(records, "poverty", "LA"), find(records, "poverty", "MAP")
    assert la["fitted"]["method"]["noise_sd"] == map_["fitted"]["method"]["noise_sd"] == sigma
    for split in ("id", "ood"):
        assert cells_of(la)[f"{split}/mse"] == cells_of(map_)[f"{split}/mse"]
        assert cells_of(la)[f"{split}/nll"] >= cells_of(map_)[f"{split}/nll"] - 1e-3


@pytest.mark.second_tier
def test_same_seed_gives_the_same_laplace_cells(bench, tmp_path, monkeypatch):
    root, records = bench
    monkeypatch.setenv("BENCH_DATA_DIR", str(root / "data"))
    monkeypatch.setenv("BENCH_WILDS_CHECKPOINTS", str(root / "checkpoints"))
    again = execute(compose_config(["experiment=laplace_redux/figure-10", "scale=smoke",
                                    "seed=0", "dataset=wilds_amazon", "method=wilds_laplace",
                                    f"results_dir={tmp_path}"]))
    assert again["cells"] == find(records, "amazon", "LA")["cells"]


@pytest.mark.second_tier
def test_report_renders_and_needs_data_without_the_files(bench, tmp_path, monkeypatch):
    _, records = bench
    written = render_report(SPEC, records, tmp_path)
    assert {p.suffix for p in written} >= {".md", ".csv", ".png"}
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "## Anchors" in text and "DE: members" in text
    monkeypatch.delenv("BENCH_WILDS_CHECKPOINTS", raising=False)
    lines = missing_data(SPEC, tmp_path / "empty")
    assert len(lines) == 5
    assert lines[0].startswith("WILDS Camelyon17 v1.0 (wilds_camelyon17): data "
                               "camelyon17_v1.0/RELEASE_v1.0.txt, camelyon17_v1.0/metadata.csv")
    assert "camelyon17/camelyon17_erm_densenet121_seed{0..9}.pth" in lines[0]
    assert "poverty/poverty_irm_fold{A..E}.pth" in lines[4]


def test_reproduce_runs_each_data_set_with_its_own_seeds():
    commands = sweep_overrides("laplace_redux/figure-10", "paper", [])
    seeds = {next(a for a in c if a.startswith("dataset=")): next(a for a in c
             if a.startswith("seed=")) for c in commands}
    assert seeds == {"dataset=wilds_camelyon17": "seed=0,1,2,3,4,5,6,7,8,9",
                     "dataset=wilds_fmow": "seed=0,1,2",
                     "dataset=wilds_civilcomments": "seed=0,1,2,3,4",
                     "dataset=wilds_amazon": "seed=0,1,2", "dataset=wilds_poverty":
                     "seed=0,1,2,3,4"}
    assert all(f"method={','.join(sorted(METHODS))}" in c for c in commands)  # appears_in


def run_cli(args: list[str], capsys, monkeypatch) -> tuple[int, list[str]]:
    from bench.cli.run_command import main as run_main

    monkeypatch.setattr(sys, "argv", ["bench.run"])
    with pytest.raises(SystemExit) as stopped:
        run_main(["experiment=laplace_redux/figure-10", "scale=smoke", "seed=0", *args])
    return stopped.value.code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.second_tier
@pytest.mark.parametrize("args, expected", [
    (["dataset.wilds_name=camelyon"], "error: dataset.wilds_name='camelyon' is not valid; "
     "choose one of: amazon, camelyon17, civilcomments, fmow, poverty"),
    (["dataset.splits.ood_test=[ood]"], "error: dataset.splits.ood_test=['ood'] names no split "
     "of camelyon17; choose from: train, id_val, test, val"),
    (["method=wilds_laplace", "dataset.laplace_prior_precision=-1"],
     "error: dataset.laplace_prior_precision=-1 is not valid; it must be a positive number"),
    (["method=wilds_laplace", "method.prior_precision=0"],
     "error: method.prior_precision=0 is not valid; it must be a positive number"),
    (["seed=12"], "error: seed=12 is not valid for wilds_camelyon17; choose one of: 0, 1, 2"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(args, expected, bench, tmp_path, capsys,
                                                      monkeypatch):
    root, _ = bench
    monkeypatch.setenv("BENCH_DATA_DIR", str(root / "data"))
    monkeypatch.setenv("BENCH_WILDS_CHECKPOINTS", str(root / "checkpoints"))
    code, lines = run_cli([*args, f"results_dir={tmp_path}"], capsys, monkeypatch)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(expected)
    assert not (tmp_path / "laplace_redux").exists()  # stopped before the job's folder


@pytest.mark.second_tier
def test_mismatched_or_missing_checkpoint_and_missing_data_exit_2(bench, tmp_path, capsys,
                                                                  monkeypatch):
    root, _ = bench
    monkeypatch.setenv("BENCH_DATA_DIR", str(root / "data"))
    wrong = tmp_path / "wrong" / "camelyon17" / "camelyon17_erm_densenet121_seed0.pth"
    wrong.parent.mkdir(parents=True)
    torch.save(wilds_checkpoint("tiny_cnn", 5, {"in_channels": 3, "width": 8}, "model", 0),
               wrong)
    monkeypatch.setenv("BENCH_WILDS_CHECKPOINTS", str(tmp_path / "wrong"))
    code, lines = run_cli([f"results_dir={tmp_path / 'r'}"], capsys, monkeypatch)
    assert code == 2 and len(lines) == 1
    assert lines[0] == (f"error: checkpoint {wrong} does not match dataset.network.architecture="
                        "'tiny_cnn' with 2 outputs: head.weight has shape (5, 8), the network "
                        "(2, 8)")
    code, lines = run_cli(["method=wilds_ensemble", f"results_dir={tmp_path / 'r'}"], capsys,
                          monkeypatch)
    assert code == 2 and lines == [
        f"error: WILDS checkpoint IRM of seed 0 not found: put camelyon17/camelyon17_irm_"
        f"densenet121_seed0.pth in $BENCH_WILDS_CHECKPOINTS/ (dataset.checkpoint_dir="
        f"{tmp_path / 'wrong'})"]
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "nothing"))
    code, lines = run_cli(["dataset=wilds_fmow", f"results_dir={tmp_path / 'r'}"], capsys,
                          monkeypatch)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(
        "error: WILDS data set 'fmow' v1.1 not found: put fmow_v1.1/RELEASE_v1.1.txt")
    assert not list((tmp_path / "r").rglob("record.json"))
