"""Network Laplace-family methods against closed forms, libraries and the paper's anchors."""

from __future__ import annotations

import math

import numpy as np
import properscoring
import torch
from scipy import stats

from bench.datasets.regression_splits import RegressionSplits
from bench.methods.laplace.laplace_torch import LaplaceTorchMethod
from bench.methods.ssla.curvature_weights import EmpiricalFisherWeights
from bench.methods.ssla.network import NetworkASSLA, NetworkSSLA
from bench.methods.ssla.refit_newton import NewtonRefit
from bench.methods.ssla.ssla_objectives import AuthorsObjective, GaussianObjective
from bench.metrics.regression import coverage, crps, nll
from bench.models.mlp import MLPShape
from bench.predictive.densities import Gaussian, kde_bandwidth_gaussian
from bench.training.regression_network import TrainedNetwork

SIGMA2, TAU = 0.3, 2.0


def _linear_problem(n: int = 40, d: int = 2, seed: int = 0):
    """Bayesian linear regression with a bias: data, the MAP network and the exact posterior."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n + 10, d, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([1.5, -0.7], dtype=torch.float64)[:d] + 0.3 + SIGMA2**0.5 * torch.randn(
        n + 10, generator=g, dtype=torch.float64)
    splits = RegressionSplits(x[:n], y[:n, None], x[n:n + 5], y[n:n + 5, None], x[n + 5:],
                              y[n + 5:, None])
    design = torch.cat([x[:n], torch.ones(n, 1, dtype=torch.float64)], dim=1)
    precision = design.T @ design / SIGMA2 + TAU * torch.eye(d + 1, dtype=torch.float64)
    mean = torch.linalg.solve(precision, design.T @ y[:n] / SIGMA2)
    shape = MLPShape((d, 1))
    base = TrainedNetwork(shape, mean.clone(), SIGMA2, TAU)
    return splits, base, mean, torch.linalg.inv(precision)


def _exact_predictive(x: torch.Tensor, mean: torch.Tensor, cov: torch.Tensor) -> Gaussian:
    design = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
    return Gaussian(design @ mean, SIGMA2 + ((design @ cov) * design).sum(-1))


def test_la_without_hidden_layers_equals_bayesian_linear_regression():
    splits, base, mean, cov = _linear_problem()
    method = LaplaceTorchMethod(subset_of_weights="all", hessian_structure="full",
                                protocol="corrected", tune_steps=0)
    method.fit(splits, 0, base)
    ours, exact = method.predict(splits.x_test), _exact_predictive(splits.x_test, mean, cov)
    torch.testing.assert_close(ours.mean, exact.mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(ours.variance, exact.variance, rtol=1e-8, atol=0)


def test_ssla_newton_on_linear_gaussian_model_is_the_exact_ppd():
    splits, base, mean, cov = _linear_problem()
    method = NetworkSSLA(structure="dense", objective=GaussianObjective(), refit=NewtonRefit())
    method.fit(splits, 0, base)
    density = method.predict(splits.x_test)
    exact = _exact_predictive(splits.x_test, mean, cov)
    grid = method.last["grid"]
    exact_log = torch.distributions.Normal(exact.mean[:, None], exact.stddev[:, None]).log_prob(
        grid)
    assert (density.log_density - exact_log).abs().max() <= 1e-8
    torch.testing.assert_close(density.variance, exact.variance, rtol=1e-8, atol=0)


def test_assla_is_the_plugin_when_curvature_ignores_y():
    splits, base, *_ = _linear_problem()
    for structure in ("diag", "kfac", "dense"):
        paper = NetworkASSLA(structure=structure, objective=AuthorsObjective())
        paper.fit(splits, 0, base)
        paper.predict(splits.x_test)
        grid = paper.last["grid"]
        plugin_log = -((grid - base.predict(splits.x_test)[:, None]) ** 2)
        torch.testing.assert_close(torch.log_softmax(paper.last["log_values"], -1),
                                   torch.log_softmax(plugin_log, -1), rtol=0, atol=1e-12)
        corrected = NetworkASSLA(structure=structure, objective=GaussianObjective())
        corrected.fit(splits, 0, base)
        density = corrected.predict(splits.x_test)
        torch.testing.assert_close(density.mean, base.predict(splits.x_test), rtol=0, atol=1e-10)
        torch.testing.assert_close(density.variance, torch.full_like(density.variance, SIGMA2),
                                   rtol=1e-9, atol=0)


def test_kde_bandwidth_summary_matches_scipy_gaussian_kde():
    grid = torch.linspace(-2, 2, 30, dtype=torch.float64)
    log_values = -(grid - 0.3) ** 2 + 0.1 * torch.sin(5 * grid)
    ours = kde_bandwidth_gaussian(torch.zeros(1), grid[None], log_values[None])
    weights = torch.softmax(log_values, 0).numpy()
    kde = stats.gaussian_kde(grid.numpy(), weights=weights)
    assert math.isclose(float(ours.variance[0]), float(kde.covariance[0, 0]), rel_tol=1e-12)
    offsets = torch.linspace(-1.96, 1.96, 30, dtype=torch.float64)
    anchor = kde_bandwidth_gaussian(torch.zeros(1), offsets[None], -(offsets[None] ** 2))
    assert math.isclose(float(anchor.stddev[0]), 0.3984954, abs_tol=2e-7)  # notes §12, float32


def test_gaussian_metrics_match_scipy_and_properscoring():
    g = np.random.default_rng(0)
    mean, sd, y = g.normal(size=50), g.uniform(0.5, 2, size=50), g.normal(size=50)
    pred = Gaussian(torch.tensor(mean), torch.tensor(sd**2))
    target = torch.tensor(y)
    assert math.isclose(nll(pred, target), -stats.norm.logpdf(y, mean, sd).mean(), rel_tol=1e-12)
    assert math.isclose(crps(pred, target), properscoring.crps_gaussian(y, mean, sd).mean(),
                        rel_tol=1e-10)
    lo, hi = stats.norm.interval(0.9, mean, sd)
    assert coverage(pred, target, 90) == 100 * np.mean((y >= lo) & (y <= hi))
    inside = np.abs(y - mean) <= 1.64 * sd
    assert coverage(pred, target, 90, z="paper") == 100 * inside.mean()


def test_paper_protocol_reproduces_table_2_assla_and_la_at_seed_42():
    from bench.datasets.toy import heteroscedastic_toy
    from bench.metrics.regression import regression_metrics
    from bench.training.regression_network import train_paper_mlp

    splits = heteroscedastic_toy(42)
    base = train_paper_mlp(splits, seed=42, lr=0.04016791033073118, batch_size=64)
    assert base.diagnostics["epochs"] == 30
    assla = NetworkASSLA(structure="diag", objective=AuthorsObjective())
    assla.fit(splits, 42, base)
    scores = regression_metrics(assla.predict(splits.x_test), splits.y_test[:, 0], z="paper")
    assert [round(scores[f"cov{k}"]) for k in (95, 90, 75, 50)] == [76, 68, 60, 56]
    la = LaplaceTorchMethod(hessian_structure="kron", protocol="paper")
    diagnostics = la.fit(splits, 42, base)
    scores = regression_metrics(la.predict(splits.x_test), splits.y_test[:, 0], z="paper")
    assert [round(scores[f"cov{k}"]) for k in (95, 90, 75, 50)] == [100, 100, 92, 68]
    assert 2.95 < diagnostics["prior_precision"] < 3.02


def test_heteroscedastic_toy_has_the_papers_split_and_fresh_test_points():
    from bench.datasets.toy import heteroscedastic_toy

    splits = heteroscedastic_toy(42)
    sizes = [len(t) for t in (splits.x_train, splits.x_val, splits.x_test)]
    assert sizes == [200, 15, 25]
    assert math.isclose(float(splits.y_train.std(unbiased=False)), 1.0, rel_tol=1e-5)
    fresh = heteroscedastic_toy(42, test_points=500)
    assert fresh.x_test.shape == (500, 1)
    torch.testing.assert_close(fresh.x_train, splits.x_train)
    assert abs(float(fresh.y_test.mean())) < 0.3


def test_empirical_fisher_assla_increment_is_the_determinant_lemma_and_depends_on_y():
    splits, base, *_ = _linear_problem()
    method = NetworkASSLA(structure="dense", objective=GaussianObjective(),
                          curvature=EmpiricalFisherWeights())
    method.fit(splits, 0, base)
    x_test = splits.x_test[:2]
    method.predict(x_test)
    grid, log_values = method.last["grid"], method.last["log_values"]
    y_hat = base.predict(x_test)
    residual_train = splits.y_train[:, 0] - base.predict(splits.x_train)
    jac = base.shape.jacobian(base.theta, splits.x_train)
    precision = (jac.T @ ((residual_train**2 / SIGMA2**2)[:, None] * jac)
                 + TAU * torch.eye(base.shape.n_params, dtype=torch.float64))
    for i in range(2):
        j_star = base.shape.jacobian(base.theta, x_test[i:i + 1])[0]
        for k in (0, 50, 100, 150):
            r = grid[i, k] - y_hat[i]
            after = precision + (r**2 / SIGMA2**2) * torch.outer(j_star, j_star)
            increment = -0.5 * (torch.logdet(after) - torch.logdet(precision))
            plugin = stats.norm.logpdf(float(grid[i, k]), float(y_hat[i]), SIGMA2**0.5)
            assert math.isclose(float(log_values[i, k]), plugin + float(increment), rel_tol=1e-10)
    shift = log_values - torch.distributions.Normal(y_hat[:, None], SIGMA2**0.5).log_prob(grid)
    assert float(shift.max() - shift.min()) > 1e-3


