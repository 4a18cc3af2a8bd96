"""The stopping rule of natural-gradient VI (hand-computed bands) and the L-BFGS polish (the
minimiser of a quadratic in closed form; a ridge-regression MAP)."""

from __future__ import annotations

import math

import pytest
import torch

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.models.glm_likelihoods import GaussianLikelihood
from bench.models.mlp import MLPShape
from bench.training.lbfgs_polish import objective_gradient, polish_minimum
from bench.training.network_grid import negative_log_joint
from bench.training.stopping import StoppingRule


def test_band_is_the_relative_range_of_the_last_window_values():
    rule = StoppingRule(window=3, tolerance=0.011)
    values = [50.0, 20.0, 20.1, 19.9, 20.0]
    # last three: 20.1, 19.9, 20.0 -> range 0.2, mean 20 -> band 0.01: settled (<= 0.011)
    assert rule.band(values) == pytest.approx(0.2 / 20.0)
    assert rule.settled(values)
    assert not rule.settled([*values, 20.5])  # 19.9..20.5 over mean 20.13: band 0.0298
    assert rule.band([*values, 20.5]) == pytest.approx(0.6 / (60.4 / 3))


def test_band_is_absolute_near_zero_and_infinite_until_the_window_is_full():
    rule = StoppingRule(window=2, tolerance=1e-3)
    assert rule.band([1e-4, -3e-4]) == pytest.approx(4e-4)  # |mean| < 1: divided by 1
    assert rule.settled([1e-4, -3e-4])
    assert rule.band([1.0]) == math.inf and not rule.settled([1.0])
    off = StoppingRule()
    assert not off.active and not off.settled([1.0] * 100)


@pytest.mark.parametrize(("window", "tolerance", "key"), [
    (-1, 1e-3, "method.stop_window=-1"), (2.5, 1e-3, "method.stop_window=2.5"),
    (True, 1e-3, "method.stop_window=True"), (10, 0.0, "method.stop_tolerance=0.0"),
])
def test_bad_stopping_settings_name_the_key(window, tolerance, key):
    with pytest.raises(ConfigError, match=key):
        StoppingRule(window=window, tolerance=tolerance)


def test_polish_reaches_the_closed_form_minimiser_of_a_quadratic():
    generator = make_generator(0)
    factor = torch.randn(30, 30, generator=generator, dtype=torch.float64)
    matrix = factor @ factor.T + 0.1 * torch.eye(30, dtype=torch.float64)  # ill-conditioned
    vector = torch.randn(30, generator=generator, dtype=torch.float64)

    def objective(theta):
        return 0.5 * theta @ matrix @ theta - vector @ theta

    start = torch.zeros(30, dtype=torch.float64)
    result = polish_minimum(objective, start, max_iterations=500, gradient_tolerance=1e-6)
    assert result.gradient_norm_before == pytest.approx(float(vector.norm()))
    assert result.gradient_norm_after <= 1e-6
    torch.testing.assert_close(result.theta, torch.linalg.solve(matrix, vector), rtol=1e-5,
                               atol=1e-6)
    assert 0 < result.iterations < 500
    assert result.gradient_norm_after == pytest.approx(
        float(objective_gradient(objective, result.theta).norm()))


def test_polish_of_a_linear_network_is_the_ridge_solution():
    x = torch.linspace(-2, 2, 25, dtype=torch.float64).unsqueeze(1)
    y = 1.5 * x.squeeze(1) - 0.3 + 0.1 * torch.sin(7 * x.squeeze(1))
    network, likelihood, delta = MLPShape((1, 1)), GaussianLikelihood(0.2), 0.7
    prior = torch.tensor([delta], dtype=torch.float64)

    def objective(theta):
        return negative_log_joint(network, theta.unsqueeze(0), x, y, likelihood, prior)[0]

    result = polish_minimum(objective, torch.tensor([3.0, 3.0], dtype=torch.float64),
                            max_iterations=100, gradient_tolerance=1e-8)
    features = torch.cat([x, torch.ones_like(x)], dim=1)  # layout: weight, then bias
    ridge = torch.linalg.solve(features.T @ features / 0.2 + delta * torch.eye(2,
                               dtype=torch.float64), features.T @ y / 0.2)
    torch.testing.assert_close(result.theta, ridge, rtol=1e-8, atol=1e-9)


def test_polish_that_cannot_improve_keeps_the_start_and_bad_budgets_are_one_line_errors():
    def objective(theta):
        return (theta**2).sum()

    start = torch.zeros(3, dtype=torch.float64)
    result = polish_minimum(objective, start, max_iterations=10, gradient_tolerance=1e-6)
    assert result.iterations == 0 and result.gradient_norm_after == 0.0
    with pytest.raises(ConfigError, match="method.polish_iterations"):
        polish_minimum(objective, start, max_iterations=0, gradient_tolerance=1e-6)
    with pytest.raises(ConfigError, match="method.polish_tolerance"):
        polish_minimum(objective, start, max_iterations=5, gradient_tolerance=-1.0)
