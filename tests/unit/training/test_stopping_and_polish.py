"""The stationarity rule of natural-gradient VI (hand-computed window measures) and the
L-BFGS polish (the minimiser of a quadratic in closed form; a ridge-regression MAP)."""

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
from bench.training.stopping import StationarityMonitor, StationarityRule


def feed(monitor, means, gradients):
    """Feed iterations ``means[t] -> means[t + 1]`` with ``gradients[t]``."""
    for t, gradient in enumerate(gradients):
        monitor.update(means[t], gradient, means[t + 1])


def vectors(*rows):
    return [torch.tensor(row, dtype=torch.float64) for row in rows]


def test_deterministic_rule_takes_the_worst_iterate_of_the_window():
    rule = StationarityRule(window=2, gradient_tolerance=0.5, step_tolerance=0.1)
    monitor = StationarityMonitor(rule, averaged=False)
    means = vectors([4.0, 0.0], [3.0, 0.0], [2.9, 0.0], [2.88, 0.0])
    feed(monitor, means, vectors([3.0, 4.0], [0.3, 0.4], [0.0, 0.1]))
    # window = last two iterates: gradient norms 0.5 and 0.1, relative steps 0.1/3, 0.02/2.9
    assert monitor.gradient_measure() == pytest.approx(0.5)
    assert monitor.step_measure() == pytest.approx(0.1 / 3)
    assert monitor.stationary()
    assert monitor.window_gradient_trace == [math.inf, pytest.approx(5.0), pytest.approx(0.5)]


def test_deterministic_rule_is_not_fooled_by_a_two_cycle():
    """Means alternating between two points with gradients of opposite sign: the loss would
    repeat exactly and the window averages of gradient and drift vanish, yet no iterate is
    stationary."""
    rule = StationarityRule(window=4, gradient_tolerance=1e-3, step_tolerance=1e-3)
    a, b = vectors([1.0, 2.0], [1.01, 2.0])
    monitor = StationarityMonitor(rule, averaged=False)
    up, down = vectors([6.0, 0.0], [-6.0, 0.0])
    feed(monitor, [a, b] * 10 + [a], [up, down] * 10)
    assert not monitor.stationary() and monitor.gradient_measure() == pytest.approx(6.0)
    averaged = StationarityMonitor(rule, averaged=True)
    feed(averaged, [a, b] * 10 + [a], [up, down] * 10)
    assert averaged.gradient_measure() == 0.0 and averaged.step_measure() == 0.0


def test_averaged_rule_uses_the_window_mean_gradient_and_the_net_drift():
    rule = StationarityRule(window=3, gradient_tolerance=0.4, step_tolerance=0.05)
    monitor = StationarityMonitor(rule, averaged=True)
    means = vectors([10.0], [11.0], [10.5], [10.0], [11.2])
    feed(monitor, means, vectors([2.0], [-1.0], [0.5], [1.0]))
    # last three gradients -1, 0.5, 1: mean 1/6; net drift of the last three iterations
    # 11.0 -> 11.2, per iteration and relative to |mu| = 11.2
    assert monitor.gradient_measure() == pytest.approx(1 / 6)
    assert monitor.step_measure() == pytest.approx(0.2 / (3 * 11.2))
    assert monitor.stationary()
    monitor.update(means[-1], torch.tensor([3.0], dtype=torch.float64), means[-1])
    assert monitor.gradient_measure() == pytest.approx((0.5 + 1 + 3) / 3)
    assert not monitor.stationary()


def test_rule_off_or_window_not_full_never_stops():
    off = StationarityMonitor(StationarityRule(), averaged=False)
    zero = torch.zeros(2, dtype=torch.float64)
    for _ in range(5):
        off.update(zero, zero, zero)
    assert not StationarityRule().active and not off.stationary()
    short = StationarityMonitor(StationarityRule(3, 1.0, 1.0), averaged=False)
    short.update(zero, zero, zero)
    assert short.gradient_measure() == math.inf and not short.stationary()


@pytest.mark.parametrize(("window", "gradient", "step", "key"), [
    (-1, 1e-3, 1e-3, "method.stop_window=-1"), (2.5, 1e-3, 1e-3, "method.stop_window=2.5"),
    (True, 1e-3, 1e-3, "method.stop_window=True"),
    (10, 0.0, 1e-3, "method.stop_gradient_tolerance=0.0"),
    (10, 1e-3, -1.0, "method.stop_step_tolerance=-1.0"),
])
def test_bad_stopping_settings_name_the_key(window, gradient, step, key):
    with pytest.raises(ConfigError, match=key):
        StationarityRule(window=window, gradient_tolerance=gradient, step_tolerance=step)


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
