"""SSLA Tables 5-6: sine data, evidence fit, and the identities the tables print.

For the linear-Gaussian RBF model, SSLA with a MAP refit is the exact (= Laplace) predictive and
ASSLA is the plug-in predictive; the tests check both on real fits, to grid precision.
"""

from __future__ import annotations

import csv
import math
from types import SimpleNamespace

import pytest
import torch
from hydra.utils import instantiate

from bench.datasets.conjugate_problems import ConjugateProblem
from bench.datasets.sine import ToySineData
from bench.harness.finished_jobs import apply_scale_overrides
from bench.harness.rng import make_generator
from bench.methods.ssla.conjugate_ssla import ASSLAMethod, SSLAMethod
from bench.metrics.regression import regression_metrics
from bench.models.conjugate_models import LinearGaussianModel
from bench.models.parametric import Data
from bench.models.rbf_regression import RBFFeatures, evidence_fit
from bench.predictive.densities import Gaussian
from bench.tasks.sine_rbf import ROWS, candidate_grid, run, torch_threads
from tests.helpers import REPO, compose_config

DOUBLE = torch.float64
GRID_PRECISION = 1e-9


def log_evidence(design: torch.Tensor, y: torch.Tensor, alpha: float, beta: float) -> float:
    """Closed-form log marginal likelihood of Bayesian linear regression (PRML eq. 3.86)."""
    n, q = design.shape
    precision = alpha * torch.eye(q, dtype=DOUBLE) + beta * design.T @ design
    mean = beta * torch.linalg.solve(precision, design.T @ y)
    energy = beta / 2 * float(((y - design @ mean) ** 2).sum()) + alpha / 2 * float(mean @ mean)
    return (q / 2 * math.log(alpha) + n / 2 * math.log(beta) - energy
            - 0.5 * float(torch.logdet(precision)) - n / 2 * math.log(2 * math.pi))


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def problem() -> SimpleNamespace:
    dataset = ToySineData("sine_heteroscedastic", n_test=8)
    split = dataset.split(make_generator(42))
    features = RBFFeatures.on_grid(dataset.x_min, dataset.x_max, 20, 1.0)
    design, design_test = features(split.x_train), features(split.x_test)
    y_train = split.y_train.double()
    fit = evidence_fit(design, y_train)
    q = design.shape[1]
    model = LinearGaussianModel(fit.noise_variance, torch.zeros(q, dtype=DOUBLE),
                                torch.eye(q, dtype=DOUBLE) / fit.prior_precision)
    data = Data(y=y_train, x=design)
    theta_hat = model.fit(data, "map")
    y_hat = design_test @ theta_hat
    post_mean, post_cov = model.posterior(data)
    exact = Gaussian(design_test @ post_mean,
                     fit.noise_variance + ((design_test @ post_cov) * design_test).sum(-1))
    plugin = Gaussian(y_hat, torch.full_like(y_hat, fit.noise_variance))
    sd = torch.full_like(y_hat, math.sqrt(fit.noise_variance))
    grid = candidate_grid(y_hat, sd, 8.0, 41)
    return SimpleNamespace(model=model, data=data, design=design, design_test=design_test,
                           y_train=y_train, y_test=split.y_test.double(), fit=fit,
                           theta_hat=theta_hat, exact=exact, plugin=plugin, grid=grid)


def predictives(problem, curvature_includes_prior: bool, increment: str):
    """SSLA and ASSLA through the method contract, moment-matched on the per-row grids."""
    conjugate = ConjugateProblem("test", problem.model, problem.data, problem.design_test,
                                 problem.grid)
    common = {"fit_objective": "map", "curvature_includes_prior": curvature_includes_prior}
    out = []
    for method in (SSLAMethod(refit="candidate", **common),
                   ASSLAMethod(increment=increment, **common)):
        method.fit(conjugate, 0)
        density = method.predict(problem.design_test)
        out.append(Gaussian(density.mean, density.variance))
    return tuple(out)


def assert_same_predictive(approx: Gaussian, reference: Gaussian, y: torch.Tensor) -> None:
    assert torch.allclose(approx.mean, reference.mean, rtol=0, atol=GRID_PRECISION)
    assert torch.allclose(approx.variance, reference.variance, rtol=GRID_PRECISION, atol=0)
    ours, theirs = regression_metrics(approx, y, z="paper"), regression_metrics(reference, y,
                                                                                 z="paper")
    for name in ("rmse", "nll", "crps"):
        assert ours[name] == pytest.approx(theirs[name], abs=GRID_PRECISION)
    for name in ("cov95", "cov90", "cov75", "cov50"):
        assert ours[name] == theirs[name]


@pytest.mark.parametrize("curvature_includes_prior", [False, True])
@pytest.mark.second_tier
def test_ssla_with_map_refit_is_the_exact_laplace_predictive(problem, curvature_includes_prior):
    ssla, _ = predictives(problem, curvature_includes_prior, "direct")
    assert_same_predictive(ssla, problem.exact, problem.y_test)


@pytest.mark.parametrize("increment", ["aggregate", "direct"])
@pytest.mark.second_tier
def test_assla_is_the_plugin_predictive(problem, increment):
    _, assla = predictives(problem, False, increment)
    assert_same_predictive(assla, problem.plugin, problem.y_test)


def test_exact_predictive_is_wider_than_the_plugin(problem):
    epistemic = problem.exact.variance - problem.plugin.variance
    assert (epistemic > 0).all()
    assert torch.allclose(problem.exact.mean, problem.plugin.mean, atol=1e-10)
    assert float(epistemic.max()) < problem.fit.noise_variance  # inside the data: noise dominates


def test_evidence_fit_is_a_maximum_of_the_closed_form_evidence(problem):
    fit = problem.fit
    assert fit.converged and 0 < fit.effective_parameters < problem.design.shape[1]
    alpha, beta = fit.prior_precision, 1 / fit.noise_variance
    best = log_evidence(problem.design, problem.y_train, alpha, beta)
    for factor in (0.9, 1.1):
        assert best > log_evidence(problem.design, problem.y_train, alpha * factor, beta)
        assert best > log_evidence(problem.design, problem.y_train, alpha, beta * factor)
    # heteroscedastic data: 0.1^2 on one side, 0.4^2 on the other, average 0.085
    assert 0.06 < fit.noise_variance < 0.11


def test_datamodule_draw_has_the_gap_and_sizes():
    dataset = ToySineData("sine_heteroscedastic")
    x, y, in_gap = dataset.draw(make_generator(0))
    assert x.shape == y.shape == (500,) and x.dtype == torch.float32
    assert dataset.gap == pytest.approx((4.8, 8.2))
    assert int(in_gap.sum()) == 100
    assert bool(((x[in_gap] > 4.8) & (x[in_gap] < 8.2)).all())
    assert float(x.min()) == -2.0 and float(x.max()) == 15.0
    split = dataset.split(make_generator(0))
    assert split.x_train.numel() == 300 and split.x_test.numel() == 100
    assert split.x_gap.numel() == 100
    kept = torch.cat([split.x_train, split.x_test]).sort().values
    assert torch.equal(kept, x[~in_gap])
    for inputs in (split.x_train, split.x_test):
        assert not bool(((inputs > 4.8) & (inputs < 8.2)).any())


@pytest.mark.parametrize("experiment, left_sd, right_sd", [
    ("ssla/table-5", 0.2915, 0.2915),
    ("ssla/table-6", 0.1, 0.4),
])
def test_dataset_variants_have_their_noise_levels(experiment, left_sd, right_sd):
    cfg = compose_config([f"experiment={experiment}", "scale=cpu"])
    dataset = instantiate(cfg.dataset)
    assert (dataset.sigma_noise_1, dataset.sigma_noise_2) == pytest.approx((left_sd, right_sd),
                                                                          abs=1e-4)
    x, y, _ = dataset.draw(make_generator(3))
    residual = y - torch.sin(x)
    left, right = residual[x <= 4.8], residual[x >= 8.2]
    assert float(left.std()) == pytest.approx(left_sd, rel=0.15)
    assert float(right.std()) == pytest.approx(right_sd, rel=0.15)


def _smoke_cells(experiment: str, seed: int) -> list[tuple[str, str, float]]:
    cfg = compose_config([f"experiment={experiment}", "scale=smoke", f"seed={seed}"])
    result = run(apply_scale_overrides(cfg, []))
    return [(c.row, c.column, c.value) for c in result.cells]


@pytest.mark.second_tier
def test_same_seed_gives_the_same_cells_named_as_the_targets():
    first, again = _smoke_cells("ssla/table-6", 42), _smoke_cells("ssla/table-6", 42)
    assert first == again
    assert first != _smoke_cells("ssla/table-6", 0)
    with open(REPO / "bench/targets/ssla.csv", newline="") as handle:
        targets = {(r["row"], r["column"]) for r in csv.DictReader(handle)
                   if r["artifact"] == "table-6"}
    assert {(row, column) for row, column, _ in first} == targets
    assert {row for row, _, _ in first} == set(ROWS)


@pytest.mark.slow
@pytest.mark.parametrize("sigmas", [(0.1, 0.4), (0.2915, 0.2915)])
def test_draw_equals_the_lightning_uq_box_datamodule(sigmas):
    toy_sine = pytest.importorskip("lightning_uq_box.datamodules.toy_sine")
    with torch.random.fork_rng():
        torch.manual_seed(7)
        module = toy_sine.ToySineDatamodule(sigma_noise_1=sigmas[0], sigma_noise_2=sigmas[1])
    x, y, in_gap = ToySineData("sine", sigma_noise_1=sigmas[0],
                               sigma_noise_2=sigmas[1]).draw(make_generator(7))
    assert torch.equal(module.X_train.squeeze(-1), x[~in_gap])
    assert torch.equal(module.Y_train.squeeze(-1), y[~in_gap])
