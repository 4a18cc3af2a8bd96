"""Laplace Redux continual learning end to end at smoke scale through ``bench.reproduce``: both
structures' records, cells recomputed by hand from the stored task states, a rerun that loads
every task and gives the same cells, the report, and bad input stopping with one line."""

from __future__ import annotations

import pytest
import torch
from hydra.utils import instantiate
from laplace import Laplace
from laplace.curvature import AsdlGGN

from bench.cli.reproduce_command import main as reproduce
from bench.datasets.continual_tasks import permuted_task
from bench.harness.finished_jobs import apply_scale_overrides
from bench.harness.job_execution import execute
from bench.harness.records import iter_records
from bench.models.classifiers import build_classifier
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from tests.helpers import compose_config, config_error_line

EXPERIMENT = "laplace_redux/continual-learning"
# Smoke scale (conf/experiment/laplace_redux/continual-learning.yaml): tasks, training and
# test images per task, epochs per task (one prior re-tuning after each).
N_TASKS, N_TRAIN, N_TEST, EPOCHS = 3, 64, 4, 1


def records_in(folder) -> dict[str, dict]:
    return {r["fitted"]["row"]: r for r in iter_records(folder, EXPERIMENT, "smoke")}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("continual")
    assert reproduce([EXPERIMENT, "--scale", "smoke", "--no-report",
                      f"results_dir={folder}"]) == 0
    return folder


def cell_values(record: dict) -> dict[str, float]:
    return {c["column"]: c["value"] for c in record["cells"]}


def task_state(results, record: dict, task: int) -> dict:
    """The stored state of the record's run after ``task`` (0-based)."""
    hashes = [t["state_hash"] for t in record["fitted"]["tasks"]]
    path = (results / "states" / "continual_laplace" / f"mnist_permuted_{task}" / hashes[task]
            / f"seed-{record['seed']}" / "state.pt")
    return torch.load(path, weights_only=True)


@pytest.mark.second_tier
def test_both_structures_learn_every_task_and_fill_the_matrices(results):
    records = records_in(results)
    assert set(records) == {"KFAC", "DIAG"}
    for row, record in records.items():
        assert record["status"] == "ok" and record["seed"] == 711
        assert record["variant"] == {"KFAC": "kron", "DIAG": "diag"}[row]
        cells = cell_values(record)
        final = [cells[f"task={s}"] for s in range(1, N_TASKS + 1)]
        assert cells["mean_accuracy"] == pytest.approx(sum(final) / N_TASKS)
        assert final == [cells[f"after={N_TASKS}/task={s}"] for s in range(1, N_TASKS + 1)]
        matrix = record["arrays"]["accuracy_matrix"]
        assert len(matrix) == N_TASKS ** 2
        for t in range(N_TASKS):  # every_task at smoke: the lower triangle, NaN above it
            for s in range(N_TASKS):
                value = matrix[t * N_TASKS + s]
                if s > t:
                    assert value is None
                else:
                    # cells are fractions (cell_units "neutral"), as the matrix is
                    assert value == pytest.approx(cells[f"after={t + 1}/task={s + 1}"])
        fitted = record["fitted"]
        assert fitted["n_tasks"] == N_TASKS and fitted["network_layers"] == [784, 100, 100, 10]
        assert fitted["n_parameters"] == 89_610 and fitted["test_points"] == N_TEST
        assert [t["n_data"] for t in fitted["tasks"]] == [N_TRAIN * (t + 1) for t in range(N_TASKS)]
        trace = record["arrays"]["prior_precision_trace"]
        assert len(trace) == EPOCHS * N_TASKS and all(p > 0 for p in trace)
        assert record["config"]["method"]["backend"] == "AsdlGGN"
        assert record["timings"]["la_eval_s"] > 0


@pytest.mark.second_tier
def test_cells_are_recomputed_from_the_stored_states(results):
    record = records_in(results)["DIAG"]
    cfg = apply_scale_overrides(compose_config([f"experiment={EXPERIMENT}", "scale=smoke"]), [])
    data = instantiate(cfg.dataset)
    splits = data.splits(711)
    state = task_state(results, record, N_TASKS - 1)
    network = build_classifier("mlp", torch.Generator())
    network.load_state_dict(state["network"])
    cells = cell_values(record)
    la = Laplace(network, "classification", subset_of_weights="all", hessian_structure="diag",
                 backend=AsdlGGN)
    posterior = state["posterior"]
    la.load_state_dict({**posterior, "sigma_noise": la.sigma_noise, "likelihood": la.likelihood,
                        "temperature": 1.0, "enable_backprop": False, "cls_name": "DiagLaplace"})
    assert la.n_data == N_TRAIN * N_TASKS
    for s in range(N_TASKS):
        x = permuted_task(splits.x_test, s)
        with torch.no_grad():
            network_hits = (network(x).argmax(-1) == splits.y_test).double().mean()
        probs = la(x, pred_type="glm", link_approx="probit")
        laplace_hits = (probs.argmax(-1) == splits.y_test).double().mean()
        assert cells[f"map/after={N_TASKS}/task={s + 1}"] == pytest.approx(network_hits)
        assert cells[f"task={s + 1}"] == pytest.approx(laplace_hits)


@pytest.mark.second_tier
def test_a_rerun_loads_every_task_and_gives_the_same_cells(results, tmp_path):
    records = records_in(results)
    record = records["KFAC"]
    (results / EXPERIMENT / "smoke" / record["config_hash"] / "record.json").rename(
        tmp_path / "first.json")
    again = execute(compose_config([f"experiment={EXPERIMENT}", "scale=smoke", "seed=711",
                                    "method.hessian_structure=kron", f"results_dir={results}"]))
    assert [t["state_reused"] for t in again["fitted"]["tasks"]] == [True] * N_TASKS
    assert again["cells"] == record["cells"]
    assert again["arrays"] == record["arrays"]


@pytest.mark.second_tier
def test_report_renders_matrices_and_anchors(results, tmp_path):
    written = render_report(SPECS[EXPERIMENT], list(records_in(results).values()), tmp_path)
    assert {p.suffix for p in written} == {".csv", ".md", ".tex", ".png"}
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "KFAC minus DIAG mean accuracy" in text and "setup (appendix C.4)" in text


@pytest.mark.parametrize("override, expected", [
    ("method.prior_precision=0", "method.prior_precision=0 is not valid; it must be a finite "
                                 "number > 0"),
    ("method.prior_precision=-1e-3", "method.prior_precision=-0.001 is not valid"),
    ("method.hessian_structure=full", "method.hessian_structure='full' is not valid; choose one "
                                      "of: kron, diag"),
    ("dataset.n_tasks=0", "dataset.n_tasks=0 is not valid; it must be an integer >= 1"),
])
@pytest.mark.second_tier
def test_bad_input_stops_with_one_line_and_writes_nothing(override, expected, tmp_path, capsys,
                                                          monkeypatch):
    line = config_error_line([f"experiment={EXPERIMENT}", "scale=smoke", override], tmp_path,
                             capsys, monkeypatch)
    assert expected in line
    assert not (tmp_path / "laplace_redux").exists()
    assert not (tmp_path / "states").exists()
