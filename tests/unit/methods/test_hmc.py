"""HMC baseline: exact posterior on a conjugate linear model, predictive variants, config, seeds."""

from __future__ import annotations

import pytest
import torch
from pyro.ops.stats import effective_sample_size

from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import ConfigError
from bench.methods.baselines.hmc import HMCMethod

TAU_IN, TAU_OUT = 1.0, 4.0
Z = 4.0  # Monte Carlo standard errors allowed before a test fails


def _splits(n: int, seed: int) -> RegressionSplits:
    """y = 0.8 x - 0.3 + N(0, 1/TAU_OUT) on n standard-normal inputs (float32, as the harness)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, generator=g)
    y = 0.8 * x - 0.3 + TAU_OUT**-0.5 * torch.randn(n, 1, generator=g)
    return RegressionSplits(x_train=x, y_train=y, x_val=x, y_val=y, x_test=x, y_test=y)


def _linear_method(**overrides) -> HMCMethod:
    """A linear model (no hidden layer) whose mass matrix roughly matches the posterior scale."""
    settings = dict(n_hidden=(), tau_in=TAU_IN, tau_out=TAU_OUT, step_size=0.3,
                    num_steps_per_sample=5, num_samples=1200, burn=100, inverse_mass=1 / 200)
    return HMCMethod(**{**settings, **overrides})


def _exact_posterior(splits: RegressionSplits) -> tuple[torch.Tensor, torch.Tensor]:
    """Closed-form Gaussian posterior of (w, b) in float64: mean and covariance."""
    design = torch.cat([splits.x_train, torch.ones_like(splits.x_train)], 1).double()
    precision = TAU_IN * torch.eye(2, dtype=torch.float64) + TAU_OUT * design.T @ design
    covariance = torch.linalg.inv(precision)
    mean = covariance @ (TAU_OUT * design.T @ splits.y_train.double().reshape(-1))
    return mean, covariance


def _monte_carlo_error(values: torch.Tensor) -> torch.Tensor:
    """Standard error of the per-column mean of a single chain ``[S, k]``, from its ESS."""
    ess = effective_sample_size(values.unsqueeze(0))
    return values.std(0) / ess.sqrt()


@pytest.mark.second_tier
def test_linear_model_matches_exact_posterior():
    splits = _splits(50, seed=0)
    method = _linear_method()
    diagnostics = method.fit(splits, seed=1)
    samples = method.samples.double()
    assert samples.shape == (1100, 2) and diagnostics["num_kept"] == 1100
    assert diagnostics["acceptance_rate"] > 0.5 and diagnostics["r_hat"] < 1.05

    mean, covariance = _exact_posterior(splits)
    variance = covariance.diagonal()
    centred_squares = (samples - mean).square()
    assert torch.all((samples.mean(0) - mean).abs() < Z * _monte_carlo_error(samples))
    assert torch.all((centred_squares.mean(0) - variance).abs()
                     < Z * _monte_carlo_error(centred_squares))


def test_paper_variance_exceeds_corrected_by_sample_variance():
    splits = _splits(20, seed=2)
    method = HMCMethod(n_hidden=(8,), step_size=0.01, num_steps_per_sample=5, num_samples=60,
                       burn=10)
    method.fit(splits, seed=3)
    x = torch.linspace(-3, 3, 7).unsqueeze(1)
    paper = method.predict(x)
    method.variance = "corrected"
    corrected = method.predict(x)
    f = method.sample_predictions(x)
    torch.testing.assert_close(paper.mean, corrected.mean)
    torch.testing.assert_close(paper.variance - corrected.variance, f.var(0))
    torch.testing.assert_close(corrected.variance, f.var(0) + 1 / method.tau_out)


def test_bad_activation_is_a_config_error():
    with pytest.raises(ConfigError, match="method.activation") as raised:
        HMCMethod(activation="swish")
    assert "choose one of: relu, tanh, sigmoid" in str(raised.value)


def test_same_seed_gives_same_predictions():
    splits = _splits(20, seed=4)
    runs = []
    for _ in range(2):
        method = HMCMethod(n_hidden=(8,), step_size=0.01, num_steps_per_sample=5,
                           num_samples=40, burn=10)
        method.fit(splits, seed=5)
        runs.append(method.predict(splits.x_test))
    assert torch.equal(runs[0].mean, runs[1].mean)
    assert torch.equal(runs[0].variance, runs[1].variance)
