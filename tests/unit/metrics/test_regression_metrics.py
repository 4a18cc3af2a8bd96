"""Interval coverage of a predictive (the one coverage implementation)."""

from __future__ import annotations

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
