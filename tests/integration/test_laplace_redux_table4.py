"""Laplace Redux Table 4 end to end at smoke scale on generated CIFAR-10 / SVHN / LSUN / CIFAR-100
files in their real formats: every method through ``bench.reproduce``, the report (LSUN cells
"needs data" when its export is absent; the whole table "needs data" without CIFAR-10), bad
input stopping with one line and exit 2, and the paper scale on ``device=cuda``."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from hydra.utils import instantiate

from bench.cli.report_command import main as report
from bench.cli.reproduce_command import main as reproduce
from bench.harness.finished_jobs import apply_scale_overrides
from bench.harness.job_execution import execute
from bench.harness.records import iter_records
from bench.models.classifiers import build_classifier
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from tests.helpers import REPO, assert_verdict_follows_fit_health, compose_config
from tests.unit.datasets.image_fixtures import write_cifar10_ood_sets

METHODS = ("method=map_classifier,classifier_ensemble,bayes_by_backprop,cyclical_sghmc,swag,"
           "laplace_classifier")
ROWS = {"MAP", "DE", "BBB", "CSGHMC", "SWAG", "LA", "LA*"}
COLUMNS = {f"{m}_{s}" for m in ("conf", "auroc") for s in ("svhn", "lsun", "cifar100")}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cifar-data")
    write_cifar10_ood_sets(root, np.random.default_rng(0))
    return root


@pytest.fixture(scope="module")
def results(data_root, tmp_path_factory):
    """Every method of Table 4 through ``bench.reproduce`` (one Hydra multirun), smoke scale."""
    folder = tmp_path_factory.mktemp("table-4")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENCH_DATA_DIR", str(data_root))
        status = reproduce(["laplace_redux/table-4", "--scale", "smoke", "--no-report", METHODS,
                            f"results_dir={folder}"])
    assert status == 0
    return folder


def records_of(results) -> list[dict]:
    return list(iter_records(results, "laplace_redux/table-4", "smoke"))


@pytest.mark.second_tier
def test_every_method_runs_and_map_cells_are_the_stored_networks_confidences(results, data_root):
    records = records_of(results)
    assert {r["status"] for r in records} == {"ok"} and len(records) == 6
    cells = {(c["row"], c["column"]): c["value"] for r in records for c in r["cells"]}
    assert {row for row, _ in cells} == ROWS
    assert all((row, column) in cells for row in ROWS for column in COLUMNS)
    assert all(0.1 <= cells[(row, f"conf_{s}")] <= 1.0 for row in ROWS
               for s in ("svhn", "lsun", "cifar100", "cifar10"))
    map_record = next(r for r in records if r["method"] == "MAP")
    assert map_record["fitted"]["ood_sets"] == ["svhn", "lsun", "cifar100"]
    assert map_record["fitted"]["ood_needs_data"] == {}
    # The network saw the crop-and-flip loader; every record used the one stored network.
    recipe = (results / "networks" / "wrn16_4" / "cifar10" / map_record["fitted"]["recipe_hash"]
              / "seed-6" / "recipe.json")
    assert '"augmentation": "crop_flip"' in recipe.read_text()
    assert {r["fitted"]["recipe_hash"] for r in records} == {map_record["fitted"]["recipe_hash"]}
    # MAP's LSUN and SVHN confidences by hand: LSUN as pixels / 255 (not normalised), SVHN
    # with the SVHN statistics of the authors' loader.
    network = build_classifier("wrn16_4", torch.Generator(), widen=1)
    network.load_state_dict(torch.load(recipe.parent / "weights.pt"))
    cfg = compose_config(["experiment=laplace_redux/table-4", "scale=smoke", "seed=6"])
    data = instantiate(map_record["config"]["dataset"] | {"_target_": cfg.dataset._target_,
                                                          "root": str(data_root)})
    from bench.datasets.vision import load_images

    lsun = load_images("lsun", "test", data_root).images.float() / 255.0
    svhn = load_images("svhn", "test", data_root).images.double() / 255.0
    svhn = ((svhn - torch.tensor([0.4376821, 0.4437697, 0.47280442]).view(1, 3, 1, 1))
            / torch.tensor([0.19803012, 0.20101562, 0.19703614]).view(1, 3, 1, 1)).float()
    with torch.no_grad():
        for name, images in (("lsun", lsun), ("svhn", svhn)):
            torch.testing.assert_close(data.ood_set(name, 6).x, images)
            probs = torch.softmax(network.eval()(images), dim=-1)
            assert cells[("MAP", f"conf_{name}")] == pytest.approx(
                float(probs.max(dim=-1).values.double().mean()), rel=1e-5)
    la = next(r for r in records if r["method"] == "la_classifier")
    assert la["fitted"]["methods"]["LA"]["laplace_class"] == "KronLLLaplace"
    assert la["fitted"]["methods"]["LA*"]["laplace_class"] == "FullLLLaplace"
    bbb = next(r for r in records if r["method"] == "BBB")
    assert bbb["config"]["method_settings"]["BBB"]["optimizer"] == "sgd"


@pytest.mark.second_tier
def test_report_marks_lsun_cells_needs_data_when_its_export_is_absent(results, data_root,
                                                                      tmp_path, monkeypatch):
    lsun_free = tmp_path / "data"
    write_cifar10_ood_sets(lsun_free, np.random.default_rng(0))
    for path in sorted((lsun_free / "lsun" / "classroom_val").iterdir()):
        path.unlink()
    (lsun_free / "lsun" / "classroom_val").rmdir()
    monkeypatch.setenv("BENCH_DATA_DIR", str(lsun_free))
    folder = tmp_path / "results"
    record = execute(compose_config(["experiment=laplace_redux/table-4", "scale=smoke",
                                     "seed=6", "method=map_classifier",
                                     f"results_dir={folder}"]))
    assert record["status"] == "ok" and "lsun" in record["fitted"]["ood_needs_data"]
    assert not any(c["column"].endswith("_lsun") for c in record["cells"])
    written = render_report(SPECS["laplace_redux/table-4"], [record], tmp_path / "out")
    frame = pd.read_csv(next(p for p in written if p.suffix == ".csv"))
    lsun = frame[frame["column"].str.endswith("_lsun")]
    assert len(lsun) == 7 * 2 and set(lsun["verdict"]) == {"needs data"}
    assert lsun["cause"].str.contains("classroom_val/ in $BENCH_DATA_DIR/lsun/",
                                      regex=False).all()
    svhn = frame[(frame["row"] == "MAP") & (frame["column"] == "conf_svhn")].iloc[0]
    assert svhn["paper"] == 77.5
    assert_verdict_follows_fit_health(svhn, [record], "MAP")
    # With every file present, the full smoke table renders with its anchors.
    monkeypatch.setenv("BENCH_DATA_DIR", str(data_root))
    written = render_report(SPECS["laplace_redux/table-4"], records_of(results), tmp_path / "all")
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "ours mean ± SE" in text and "LA* AUROC on CIFAR-10 vs SVHN" in text
    assert "needs data" not in text


def test_without_the_data_the_report_lists_every_paper_cell_as_needs_data(tmp_path,
                                                                          monkeypatch, capsys):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "empty"))
    status = report(["laplace_redux/table-4", "--results-dir", str(tmp_path / "none"), "--out",
                     str(tmp_path / "reports")])
    assert status == 0 and "(needs data)" in capsys.readouterr().out
    frame = pd.read_csv(tmp_path / "reports" / "laplace_redux" / "table-4.csv")
    assert len(frame) == 7 * 6 and set(frame["verdict"]) == {"needs data"}
    text = (tmp_path / "reports" / "laplace_redux" / "table-4.md").read_text()
    for expected in ("data_batch_1", "$BENCH_DATA_DIR/cifar10/cifar-10-batches-py/",
                     "test_32x32.mat in $BENCH_DATA_DIR/svhn/",
                     "test in $BENCH_DATA_DIR/cifar100/cifar-100-python/",
                     "for the *_lsun cells only", "classroom_val/ in $BENCH_DATA_DIR/lsun/",
                     "## Anchors (checked once records exist)", "needs a GPU"):
        assert expected in text, expected


def run_job(data_root, results_dir, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "BENCH_DATA_DIR": str(data_root), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "bench.run", "experiment=laplace_redux/table-4",
                           "scale=smoke", "seed=6", f"results_dir={results_dir}", *overrides],
                          cwd=REPO, capture_output=True, text=True, env=env, timeout=300)


def last_line(done: subprocess.CompletedProcess) -> str:
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.second_tier
@pytest.mark.parametrize(("overrides", "expected"), [
    (["dataset.ood=[svhn,lsun_bedroom]"],
     "error: dataset.ood='lsun_bedroom' is not valid; choose one of: mnist, fashion_mnist"),
    (["dataset.ood_normalisation.lsun=imagenet"],
     "error: dataset.ood_normalisation.lsun='imagenet' is not valid; choose one of: unit"),
    (["dataset.augmentation=flip"],
     "error: dataset.augmentation='flip' is not valid; choose one of: none, crop_flip"),
])
def test_bad_settings_stop_with_one_line_and_exit_2(data_root, tmp_path, overrides, expected):
    done = run_job(data_root, tmp_path, *overrides)
    assert done.returncode == 2 and last_line(done).startswith(expected), done.stderr[-400:]
    assert not (tmp_path / "laplace_redux").exists()


@pytest.mark.second_tier
def test_a_missing_split_stops_with_one_line_and_exit_2(data_root, tmp_path):
    partial = tmp_path / "data"
    write_cifar10_ood_sets(partial, np.random.default_rng(0))
    (partial / "svhn" / "test_32x32.mat").unlink()
    done = run_job(partial, tmp_path / "results")
    assert done.returncode == 2
    assert last_line(done).startswith("error: image data set 'svhn' (test split) not found: put "
                                      f"test_32x32.mat in {partial}/svhn/")
    assert not (tmp_path / "results" / "laplace_redux").exists()


@pytest.mark.second_tier
def test_a_checkpoint_of_another_architecture_stops_with_one_line_and_exit_2(data_root,
                                                                            tmp_path):
    # A WRN-16-2 state dict offered as the starting weights of the WRN-16-1 stand-in.
    other = build_classifier("wrn16_4", torch.Generator().manual_seed(0), widen=2)
    weights = tmp_path / "wrn16_2.pt"
    torch.save(other.state_dict(), weights)
    done = run_job(data_root, tmp_path / "results", f"+network.pretrained={weights}")
    assert done.returncode == 2
    assert last_line(done).startswith(f"error: recipe.pretrained='{weights}' does not fit "
                                      "WideResNet")
    assert not (tmp_path / "results" / "laplace_redux").exists()


def test_paper_scale_runs_every_piece_on_cuda():
    from bench.cli.reproduce_command import sweep_overrides

    overrides = ["experiment=laplace_redux/table-4", "scale=paper",
                 "method=laplace_classifier"]
    cfg = apply_scale_overrides(compose_config(overrides), overrides)
    assert cfg.device == "cuda" and cfg.dataset.device == "cuda"
    assert cfg.method.device == "cuda" and cfg.dataset.augmentation == "crop_flip"
    assert cfg.network.model == {"name": "wrn16_4", "options": {"dropout": 0.3, "widen": 4}}
    assert cfg.method_settings.BBB.model.options == {"dropout": 0.0}
    main, swag = sweep_overrides("laplace_redux/table-4", "paper", [])
    assert main[2:] == ["seed=6,12,13,523,972394", "method=bayes_by_backprop,classifier_ensemble"
                        ",cyclical_sghmc,laplace_classifier,map_classifier"]
    assert swag[2:] == ["seed=6", "method=swag"]
    if not torch.cuda.is_available():
        from bench.harness.errors import ConfigError
        from bench.harness.job_execution import check_device

        with pytest.raises(ConfigError, match="^device='cuda' is not available"):
            check_device(cfg.device)
