"""The authors' data and intermediate values (notes §2-§4 anchors) reproduce with seed 42."""

from __future__ import annotations

import pytest
import torch

from bench.datasets.conjugate_problems import (
    LinearRegressionData,
    NormalNormalData,
    PoissonGammaData,
)
from bench.harness.rng import make_generator
from bench.methods.ssla.algorithm import assla_log_ppd, ssla_log_ppd

SIZES = [20, 100, 1000, 10000, 100000, 1000000]


def test_normal_normal_theta_hat_and_n20_values():
    data = NormalNormalData("normal_normal", 4.0, 2.0, 4.0, 1.0, SIZES)
    problems = list(data.problems(make_generator(42), torch.float32))
    theta_hats = [float(p.model.fit(p.data, "mle")) for p in problems]
    assert theta_hats == pytest.approx([4.30569, 4.12498, 4.04662, 4.00560, 4.00053, 3.99901],
                                       abs=6e-6)
    first = problems[0]
    ssla = ssla_log_ppd(first.model, first.data, None, first.y_grid)
    assla = assla_log_ppd(first.model, first.data, None, first.y_grid)
    assert float(ssla.parts["log_lik_hat"]) == pytest.approx(-34.5505, abs=1e-4)
    assert float(ssla.parts["half_logdet_hat"]) == pytest.approx(1.15129, abs=1e-5)
    assert float(ssla.values[0]) == pytest.approx(-5.6623, abs=1e-4)
    assert float(assla.values[0]) == pytest.approx(-5.9247, abs=1e-4)


def test_poisson_gamma_theta_hat_and_n20_log_likelihood():
    data = PoissonGammaData("poisson_gamma", 3.0, 6.0, 2.0, SIZES)
    problems = list(data.problems(make_generator(42), torch.float32))
    theta_hats = [float(p.model.fit(p.data, "mle")) for p in problems]
    assert theta_hats == pytest.approx([2.5, 2.67, 3.046, 2.998, 3.00021, 3.00065], abs=6e-6)
    first = problems[0]
    log_lik = first.model.log_likelihood(first.model.fit(first.data, "mle"), first.data)
    assert float(log_lik) == pytest.approx(-34.1097, abs=1e-4)


def test_blr_default_and_n1000_anchors():
    prior = [{"mean": [0.0, 0.0], "cov_scale": 1.0}]
    default = LinearRegressionData("blr", 100, 100.0, [3.0, 5.0], prior)
    problem = next(default.problems(make_generator(42), torch.float32))
    theta_hat = problem.model.fit(problem.data, "mle")
    assert theta_hat.tolist() == pytest.approx([2.9987, 4.5382], abs=1e-4)
    log_lik = problem.model.log_likelihood(theta_hat, problem.data)
    assert float(log_lik) == pytest.approx(-355.312, abs=1e-3)
    ssla = ssla_log_ppd(problem.model, problem.data, problem.x_new, problem.y_grid[:1])
    info = problem.model.information(theta_hat, problem.data)
    augmented = info + torch.outer(problem.x_new, problem.x_new) / 100.0
    delta_j = 0.5 * (torch.logdet(info) - torch.logdet(augmented))
    assert float(delta_j) == pytest.approx(-0.00516, abs=1e-5)
    assert torch.isfinite(ssla.values).all()
    n1000 = LinearRegressionData("blr_n1000", 1000, 100.0, [3.0, 5.0], prior)
    problem = next(n1000.problems(make_generator(42), torch.float32))
    assert problem.model.fit(problem.data, "mle").tolist() == pytest.approx([2.684, 5.0064],
                                                                            abs=1e-3)
