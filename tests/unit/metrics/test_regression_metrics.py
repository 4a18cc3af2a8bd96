"""Interval coverage of a predictive (the one coverage implementation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.harness.rng import make_generator
from bench.metrics.regression import central_interval, coverage, fraction_inside
from bench.predictive.densities import Gaussian


def test_central_interval_and_its_coverage_of_normal_draws():
    mean = torch.zeros(40000, dtype=torch.float64)
    variance = torch.full_like(mean, 4.0)
    lower, upper = central_interval(Gaussian(mean, variance), 0.95)
    assert float(upper[0]) == pytest.approx(2 * 1.959963984540054)
    truth = 2 * torch.randn(40000, generator=make_generator(0), dtype=torch.float64)
    assert fraction_inside(lower, upper, truth) == pytest.approx(0.95, abs=0.005)


def test_coverage_percent_exact_and_paper_quantiles():
    # -1.96 lies just outside the exact 95% interval (z = 1.95996) but inside the paper's.
    predictive = Gaussian(torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64))
    y = torch.tensor([0.0, 1.0, -1.96, 3.0], dtype=torch.float64)
    assert coverage(predictive, y, 95) == 50.0
    assert coverage(predictive, y, 95, z="paper") == 75.0
    assert coverage(predictive, y, 50) == 25.0


def test_regression_calibration_error_by_hand():
    from scipy.stats import norm

    from bench.metrics.regression import calibration_levels, regression_calibration_error

    # CDF values 0.1, 0.5, 0.95 at levels j/9: phat = 0, 1/3 (j=1..4), 2/3 (j=5..8), 1; the
    # differences in ninths are 0, -2, -1, 0, 1, -1, 0, 1, 2, 0: sum of squares 12/81, mean
    # over the 10 levels 12/810, times T = 3 points: 2/45.
    mean = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    sd = torch.tensor([2.0, 0.5, 1.0], dtype=torch.float64)
    y = mean + sd * torch.tensor(norm.ppf([0.1, 0.5, 0.95]), dtype=torch.float64)
    predictive = Gaussian(mean, sd**2)
    assert calibration_levels(10)[1] == pytest.approx(1 / 9)
    assert regression_calibration_error(predictive, y, 10) == pytest.approx(2 / 45, rel=1e-12)


def test_regression_calibration_error_matches_the_authors_formula_and_mse():
    from scipy.stats import norm
    from sklearn.metrics import mean_squared_error

    from bench.metrics.regression import mse, regression_calibration_error

    generator = make_generator(3)
    mean = torch.randn(200, generator=generator, dtype=torch.float64)
    sd = 0.5 + torch.rand(200, generator=generator, dtype=torch.float64)
    y = mean + 1.7 * sd * torch.randn(200, generator=generator, dtype=torch.float64)
    levels = np.linspace(0, 1, 10)
    cdf = norm(mean.numpy(), sd.numpy()).cdf(y.numpy())
    observed = [float((cdf <= p).mean()) for p in levels]
    expected = len(y) * mean_squared_error(levels, observed)
    predictive = Gaussian(mean, sd**2)
    assert regression_calibration_error(predictive, y) == pytest.approx(expected, rel=1e-9)
    assert expected > 1.0  # over-dispersed targets: miscalibrated
    assert mse(predictive, y) == pytest.approx(float(((mean - y) ** 2).mean()), rel=1e-12)
