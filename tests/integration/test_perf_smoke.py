"""Smoke test of the speed benchmark: ``python -m bench.perf --quick`` writes its report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RATIO_ROWS = ("| ASSLA vs reference", "| ASSLA vs LA GLM predictive", "| Newton vs SGD refit")


@pytest.mark.slow
def test_perf_quick_writes_the_three_ratio_rows(tmp_path):
    """The quick run exits cleanly and its report has one PASS/MISS row per target ratio."""
    out = tmp_path / "perf.md"
    proc = subprocess.run([sys.executable, "-m", "bench.perf", "--quick", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = out.read_text().splitlines()
    for prefix in RATIO_ROWS:
        rows = [line for line in lines if line.startswith(prefix)]
        assert len(rows) == 1, f"missing ratio row {prefix!r}"
        assert rows[0].rstrip().endswith(("| PASS |", "| MISS |")), rows[0]


@pytest.mark.second_tier
def test_paper_training_benchmark_times_both_loops_to_the_same_weights(tmp_path):
    """The quick run of the fast-loop vs Lightning benchmark writes one row each for the paper
    MLP, alpha-VI and MFVI on the toy, weights equal."""
    from bench.benchmarks.paper_training import main

    out = tmp_path / "perf_training.md"
    main(["--quick", "--uci", "--out", str(out)])
    rows = [line for line in out.read_text().splitlines() if line.startswith("| Table 2 toy")]
    assert len(rows) == 3
    assert "alpha-VI" in rows[1] and "MFVI" in rows[2]
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] == "3" and cells[-1] == "yes" and float(cells[-2].rstrip("x")) > 0


@pytest.mark.slow
def test_ssla_refit_benchmark_writes_its_three_rows(tmp_path):
    """The refit comparison runs at a tiny size and reports the three refits side by side."""
    out = tmp_path / "refit-perf.md"
    proc = subprocess.run([sys.executable, "-m", "bench.benchmarks.ssla_refit", "--n-test", "1",
                           "--grid", "5", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = out.read_text().splitlines()
    for prefix in ("| one Gauss-Newton step", "| damped Newton to the MAP", "| L-BFGS refits"):
        assert sum(line.startswith(prefix) for line in lines) == 1, prefix


def test_hmc_sampler_benchmark_times_both_samplers_to_the_same_samples(tmp_path):
    """The quick run of the fast-HMC vs pyro benchmark writes one row, samples equal."""
    from bench.benchmarks.hmc_sampler_speed import main

    out = tmp_path / "hmc-perf.md"
    main(["--quick", "--out", str(out)])
    rows = [line for line in out.read_text().splitlines()
            if line.rstrip().endswith(("| yes |", "| NO |"))]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[3] == "4" and cells[-1] == "yes" and float(cells[2].rstrip("x")) > 0


def test_natural_gradient_benchmark_times_every_algorithm_and_matches_the_textbook_update(
        tmp_path):
    """The quick run writes one row per algorithm; our update equals the textbook one."""
    from bench.benchmarks.natural_gradient import ROWS, main

    out = tmp_path / "ngvi-perf.md"
    main(["--quick", "--out", str(out)])
    rows = [line for line in out.read_text().splitlines()
            if line.startswith(("| OGGN", "| LGVA", "| VOGGN"))]
    assert len(rows) == len(ROWS)
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[1]) > 0 and float(cells[3]) > 0
        assert float(cells[-2]) < 1e-9 and float(cells[-1]) < 1e-9


def test_la_prediction_benchmark_splits_the_la_prediction_into_steps_that_reassemble_it(
        tmp_path):
    """The quick run times MAP and the LA side by side, splits the LA into its steps (the
    reassembled probabilities equal the LA's) and writes the quotable cause line."""
    from bench.benchmarks.la_prediction import STEPS, main

    out = tmp_path / "la-prediction-perf.md"
    main(["--quick", "--out", str(out)])
    text = out.read_text()
    lines = text.splitlines()
    for label in (*STEPS.values(), "sum of the steps"):
        assert sum(line.startswith(f"| {label} |") for line in lines) == 1, label
    assert "equal to `method.predict`'s" in text
    assert sum(line.startswith("Cause of the anchor: LA / MAP prediction time ")
               for line in lines) == 1


def test_kron_variance_diagonal_is_the_diagonal_of_laplace_torchs_functional_variance():
    """Known answer: on a float64 network the structured diagonal equals laplace-torch's
    ``J P^-1 J^T`` diagonal from the dense last-layer Jacobians."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from bench.benchmarks.la_prediction import kron_variance_diagonal, last_layer_jacobians
    from bench.harness.rng import make_generator

    laplace = pytest.importorskip("laplace")
    torch.manual_seed(0)
    network = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 4)).double()
    generator = make_generator(0)
    x = torch.randn(30, 6, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 4, (30,), generator=generator)
    la = laplace.Laplace(network, "classification", subset_of_weights="last_layer",
                         hessian_structure="kron", prior_precision=0.7,
                         backend=laplace.curvature.BackPackGGN)
    la.fit(DataLoader(TensorDataset(x, y), batch_size=8))
    with torch.no_grad():
        f, phi = la.model.forward_with_features(x)
        jacobians = last_layer_jacobians(la, phi, f)
        reference, _ = la.backend.last_layer_jacobians(x)
        exact = la.functional_variance(jacobians).diagonal(dim1=1, dim2=2)
        ours = kron_variance_diagonal(la, phi)
    assert torch.equal(jacobians, reference)
    torch.testing.assert_close(ours, exact, rtol=1e-12, atol=0)


@pytest.mark.second_tier
def test_ensemble_training_benchmark_times_both_paths_and_finds_the_same_networks(tmp_path):
    """The quick run trains the members together and one by one, prints the ratio and a weight
    difference at float rounding (the bound: tests/unit/training/test_stacked_training.py's,
    which holds in the pinned arithmetic and is looser where it cannot be pinned). Both paths
    must have run; their speed is the benchmark's to print, not a test's to judge."""
    from bench.benchmarks.ensemble_training_speed import main
    from tests.unit.training.test_stacked_training import TOLERANCE

    out = tmp_path / "ensemble-perf.md"
    main(["--quick", "--threads", "1", "--out", str(out)])
    lines = out.read_text().splitlines()
    for label in ("together (stacked", "one by one (", "speed-up of training together"):
        assert sum(line.startswith(f"| {label}") for line in lines) == 1, label
    difference = next(line for line in lines if line.startswith("Target:"))
    weights = difference.split("Largest weight difference between the paths: ")[1]
    assert float(weights.split(";")[0]) < TOLERANCE


@pytest.mark.second_tier
def test_start_up_benchmark_reports_the_overhead_beside_import_torch(tmp_path):
    """The quick run times one import and one smoke job, and its overhead row is the job's wall
    time less the task time of the record it wrote."""
    from bench.benchmarks.start_up import main

    out = tmp_path / "start-up.md"
    main(["--quick", "--out", str(out)])
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1].strip(" |")
            for line in out.read_text().splitlines() if line.startswith("| ")}
    job, task = float(rows["smoke job (wall)"]), float(rows["its task (record `timings.total_s`)"])
    assert float(rows["overhead = job wall - task"]) == pytest.approx(job - task, abs=0.011)
    assert 0.0 < float(rows["record `timings.startup_s` (process start to task start)"]) < job
    ratio = float(rows["overhead / import torch"].rstrip("x"))
    assert ratio == pytest.approx((job - task) / float(rows['`python -c "import torch"` (wall)']),
                                  rel=0.05)


def test_network_grid_benchmark_reports_the_floor_under_a_batched_step(tmp_path):
    """The quick run trains the grid row batched and one by one to the same parameters, and
    the cap it prints is the one-by-one time per network-step over the floor's."""
    from bench.benchmarks.network_grid_speed import main

    out = tmp_path / "grid-perf.md"
    main(["--quick", "--out", str(out)])
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in out.read_text().splitlines() if line.startswith("| ")]
    cells = {row[0]: row[1:] for row in rows}
    single = float(cells["one by one (B = 1 each)"][1])
    floor = float(cells["floor: one forward + backward of the row, per network"][1])
    cap = float(cells["largest speed-up any batched step could reach (one by one / floor)"][0]
                .rstrip("x"))
    assert floor > 0 and cap == pytest.approx(single / floor, rel=0.02)
    assert "(the same optimisation)" in out.read_text()


@pytest.mark.second_tier
def test_glm_jacobian_benchmark_times_both_paths_to_the_same_jacobians(tmp_path):
    """The quick run writes one row per network; both paths give the same Jacobians."""
    from bench.benchmarks.glm_jacobian_speed import NETWORKS, main

    out = tmp_path / "glm-jacobians-perf.md"
    main(["--quick", "--out", str(out)])
    rows = [line for line in out.read_text().splitlines()
            if line.startswith(tuple(f"| {label} |" for label, *_ in NETWORKS))]
    assert len(rows) == len(NETWORKS)
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[3]) > 0 and float(cells[4]) > 0
        assert float(cells[6].split()[0]) < 1e-5


def test_subnormal_training_benchmark_times_both_networks_to_the_same_loss(tmp_path):
    """The quick run writes one row per share of subnormal weights; zeroing them leaves the
    minibatch loss as it was."""
    from bench.benchmarks.subnormal_training import SUBNORMAL_SHARES, main

    out = tmp_path / "subnormal-perf.md"
    main(["--quick", "--out", str(out)])
    rows = [line for line in out.read_text().splitlines()
            if line.startswith(tuple(f"| {label} |" for label, _ in SUBNORMAL_SHARES))]
    assert len(rows) == len(SUBNORMAL_SHARES)
    for row, (_, count) in zip(rows, SUBNORMAL_SHARES, strict=True):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert int(cells[1].replace(",", "")) == count
        assert float(cells[2]) > 0 and float(cells[3]) > 0
        assert float(cells[5]) < 1e-6
