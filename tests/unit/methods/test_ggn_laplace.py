"""Laplace-GGN (GGN thesis, Chapter 3) on a tiny tanh network in float64: function-space vs
parameter-space algebra, eq. 3.18 vs eq. 3.19, stationarity, the predictives in closed form,
and laplace-torch's log marginal likelihood as an outside cross-check."""

from __future__ import annotations

import functools
import math
import warnings

import pytest
import torch

from bench.harness.rng import make_generator
from bench.methods.laplace.ggn_laplace import (
    FunctionSpaceGGN,
    GaussianPosterior,
    blr_log_evidence,
    blr_mean,
    laplace_ggn_log_evidence,
    laplace_ggn_posterior,
    laplace_ggn_precision,
    linearised_log_evidence,
    log_det_ggn_precision,
)
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood
from bench.models.mlp import MLPShape, init_parameters

TINY = MLPShape((1, 6, 6, 1), "tanh")
DELTA = 0.7
NOISE = 0.2
LIKELIHOODS = {"gaussian": GaussianLikelihood(NOISE), "bernoulli": BernoulliLikelihood()}


def toy_data(likelihood: str, n: int = 20):
    generator = make_generator(3)
    x = torch.rand(n, 1, generator=generator, dtype=torch.float64) * 4 - 2
    if likelihood == "gaussian":
        y = torch.sin(2 * x[:, 0]) + 0.3 * torch.randn(n, generator=generator,
                                                        dtype=torch.float64)
    else:
        y = (torch.rand(n, generator=generator, dtype=torch.float64)
             < torch.sigmoid(3 * x[:, 0])).to(torch.float64)
    return x, y


def random_theta(seed: int = 0) -> torch.Tensor:
    return init_parameters(TINY, make_generator(seed), torch.float64)


@functools.cache
def stationary_theta(likelihood: str) -> torch.Tensor:
    """The MAP to gradient norm below 1e-6 (L-BFGS, float64)."""
    x, y = toy_data(likelihood)
    lik = LIKELIHOODS[likelihood]
    theta = random_theta().requires_grad_(True)
    optimizer = torch.optim.LBFGS([theta], lr=1, max_iter=5000, tolerance_grad=1e-13,
                                  tolerance_change=1e-16, history_size=50,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = (-lik.log_prob(TINY.forward_1d(theta, x), y).sum()
                + 0.5 * DELTA * theta.pow(2).sum())
        loss.backward()
        return loss

    for _ in range(3):
        optimizer.step(closure)
    assert float(theta.grad.norm()) < 1e-6
    return theta.detach()


def ingredients(likelihood: str, theta: torch.Tensor):
    x, y = toy_data(likelihood)
    f = TINY.forward_1d(theta, x)
    return LIKELIHOODS[likelihood], f, y, TINY.jacobian(theta, x)


@pytest.mark.parametrize("likelihood", sorted(LIKELIHOODS))
def test_function_space_log_det_and_variances_equal_the_p_by_p_ones(likelihood):
    lik, f, _, jacobian = ingredients(likelihood, random_theta())
    weights = lik.hessian(f)
    precision = laplace_ggn_precision(jacobian, weights, DELTA).to_dense()
    assert jacobian.shape[0] < jacobian.shape[1]
    function_space = FunctionSpaceGGN.fit(jacobian, weights, DELTA)
    assert float(function_space.logdet()) == pytest.approx(
        float(torch.logdet(precision)), rel=1e-12)
    assert log_det_ggn_precision(jacobian, weights, DELTA) == pytest.approx(
        float(torch.logdet(precision)), rel=1e-12)
    x_new = torch.linspace(-3, 3, 7, dtype=torch.float64).unsqueeze(1)
    j_new = TINY.jacobian(random_theta(), x_new)
    dense = torch.linalg.inv(precision)
    expected = torch.einsum("mp,pq,mq->m", j_new, dense, j_new)
    posterior = GaussianPosterior.from_precision(random_theta(), precision)
    torch.testing.assert_close(function_space.function_variance(j_new), expected,
                               rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(posterior.function_variance(j_new), expected,
                               rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(posterior.covariance(), dense, rtol=1e-9, atol=1e-12)
    vector = torch.linspace(-1, 1, dense.shape[0], dtype=torch.float64)
    torch.testing.assert_close(function_space.solve(vector), dense @ vector, rtol=1e-9,
                               atol=1e-12)


def test_saturated_bernoulli_points_are_fine_in_function_space():
    jacobian = TINY.jacobian(random_theta(), toy_data("bernoulli")[0])
    weights = torch.zeros(jacobian.shape[0], dtype=torch.float64)
    weights[:3] = 0.25
    precision = laplace_ggn_precision(jacobian, weights, DELTA).to_dense()
    assert log_det_ggn_precision(jacobian, weights, DELTA) == pytest.approx(
        float(torch.logdet(precision)), rel=1e-12)


@pytest.mark.parametrize("likelihood", sorted(LIKELIHOODS))
def test_eq_3_18_at_the_blr_mean_is_the_exact_evidence_of_eq_3_19_at_any_theta(likelihood):
    theta = random_theta(5)
    lik, f, y, jacobian = ingredients(likelihood, theta)
    precision = laplace_ggn_precision(jacobian, lik.hessian(f), DELTA)
    mean = blr_mean(lik, f, y, jacobian, theta, GaussianPosterior(theta, precision))
    assert float((mean - theta).norm()) > 1e-2  # not stationary: the identity is not trivial
    assert blr_log_evidence(lik, f, y, jacobian, theta, DELTA, mean) == pytest.approx(
        linearised_log_evidence(lik, f, y, jacobian, theta, DELTA), rel=1e-10)
    assert blr_log_evidence(lik, f, y, jacobian, theta, DELTA, theta) == pytest.approx(
        laplace_ggn_log_evidence(lik, f, y, jacobian, theta, DELTA), rel=1e-10)


@pytest.mark.parametrize("likelihood", sorted(LIKELIHOODS))
@pytest.mark.second_tier
def test_at_a_stationary_map_the_laplace_evidence_equals_the_exact_n_by_n_form(likelihood):
    theta = stationary_theta(likelihood)
    lik, f, y, jacobian = ingredients(likelihood, theta)
    laplace = laplace_ggn_log_evidence(lik, f, y, jacobian, theta, DELTA)
    assert laplace == pytest.approx(linearised_log_evidence(lik, f, y, jacobian, theta, DELTA),
                                    abs=1e-8)
    model = laplace_ggn_posterior(TINY, theta, toy_data(likelihood)[0], lik, DELTA)
    mean = blr_mean(lik, f, y, jacobian, theta, model.posterior)
    assert float((mean - theta).norm() / theta.norm()) < 1e-6


def test_gaussian_evidence_by_hand_for_a_linear_network():
    """A network with no hidden layer is linear: f = w x + b, so the Laplace-GGN evidence is
    the exact Bayesian linear regression evidence, log N(y | 0, delta^-1 X X^T + sigma^2 I)."""
    linear = MLPShape((1, 1), "tanh")
    x, y = toy_data("gaussian")
    design = torch.cat([x, torch.ones_like(x)], dim=1)
    precision = DELTA * torch.eye(2, dtype=torch.float64) + design.T @ design / NOISE
    theta = torch.linalg.solve(precision, design.T @ y / NOISE)
    f = linear.forward_1d(theta, x)
    ours = laplace_ggn_log_evidence(GaussianLikelihood(NOISE), f, y, linear.jacobian(theta, x),
                                    theta, DELTA)
    covariance = design @ design.T / DELTA + NOISE * torch.eye(len(y), dtype=torch.float64)
    exact = torch.distributions.MultivariateNormal(torch.zeros_like(y), covariance).log_prob(y)
    assert ours == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.second_tier
def test_gaussian_evidence_matches_laplace_torch_full_ggn():
    """laplace-torch 0.3 with the ASDL backend (its curvlinops backend multiplies by a float32
    identity, which costs 1e-7 relative accuracy in float64)."""
    laplace = pytest.importorskip("laplace")
    from laplace.curvature import AsdlGGN
    from torch.utils.data import DataLoader, TensorDataset

    theta = stationary_theta("gaussian")
    x, y = toy_data("gaussian")
    loader = DataLoader(TensorDataset(x, y.unsqueeze(1)), batch_size=len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        la = laplace.Laplace(TINY.module(theta), "regression", subset_of_weights="all",
                             hessian_structure="full", sigma_noise=math.sqrt(NOISE),
                             prior_precision=DELTA, backend=AsdlGGN)
        la.fit(loader)
        theirs = float(la.log_marginal_likelihood())
    lik, f, y, jacobian = ingredients("gaussian", theta)
    assert laplace_ggn_log_evidence(lik, f, y, jacobian, theta, DELTA) == pytest.approx(
        theirs, rel=1e-12)


@pytest.mark.parametrize("likelihood", sorted(LIKELIHOODS))
def test_glm_sampling_and_nn_sampling_use_their_own_functions(likelihood):
    theta = stationary_theta(likelihood)
    x, _ = toy_data(likelihood)
    model = laplace_ggn_posterior(TINY, theta, x, LIKELIHOODS[likelihood], DELTA)
    x_new = torch.linspace(-3, 3, 5, dtype=torch.float64).unsqueeze(1)
    draws = model.posterior.sample(3, make_generator(0))
    nn = model.network_outputs(draws, x_new)
    for s in range(3):
        torch.testing.assert_close(nn[s], TINY.forward_1d(draws[s], x_new))
    glm = model.linearised_outputs(draws, x_new)
    expected = (TINY.forward_1d(theta, x_new)
                + (draws - theta) @ TINY.jacobian(theta, x_new).T)
    torch.testing.assert_close(glm, expected)


def test_glm_moments_are_the_closed_form_of_glm_sampling():
    theta = stationary_theta("gaussian")
    x, _ = toy_data("gaussian")
    model = laplace_ggn_posterior(TINY, theta, x, GaussianLikelihood(NOISE), DELTA)
    x_new = torch.linspace(-3, 3, 5, dtype=torch.float64).unsqueeze(1)
    mean, variance = model.glm_function_moments(x_new)
    torch.testing.assert_close(mean, TINY.forward_1d(theta, x_new))
    draws = model.linearised_outputs(model.posterior.sample(40000, make_generator(1)), x_new)
    torch.testing.assert_close(draws.mean(0), mean, atol=4 * float(variance.max().sqrt()) / 200,
                               rtol=0)
    torch.testing.assert_close(draws.var(0), variance, rtol=0.04, atol=0)
    blr_mean_y, blr_variance = model.blr_predictive(x_new)
    torch.testing.assert_close(blr_mean_y, mean)
    torch.testing.assert_close(blr_variance, variance + NOISE)


def test_bernoulli_blr_predictive_is_eq_3_16():
    theta = stationary_theta("bernoulli")
    x, _ = toy_data("bernoulli")
    model = laplace_ggn_posterior(TINY, theta, x, BernoulliLikelihood(), DELTA)
    x_new = torch.tensor([[-1.0], [0.5]], dtype=torch.float64)
    mean, variance = model.blr_predictive(x_new)
    f = TINY.forward_1d(theta, x_new)
    s = torch.sigmoid(f)
    jacobian = TINY.jacobian(theta, x_new)
    covariance = torch.linalg.inv(laplace_ggn_precision(
        TINY.jacobian(theta, x), BernoulliLikelihood().hessian(TINY.forward_1d(theta, x)),
        DELTA).to_dense())
    lam = s * (1 - s)
    torch.testing.assert_close(mean, s)
    torch.testing.assert_close(
        variance, lam**2 * torch.einsum("mp,pq,mq->m", jacobian, covariance, jacobian) + lam)


def test_posterior_draws_have_the_posterior_covariance():
    precision = torch.tensor([[2.0, 0.6], [0.6, 1.0]], dtype=torch.float64)
    posterior = GaussianPosterior.from_precision(torch.tensor([1.0, -1.0],
                                                              dtype=torch.float64), precision)
    draws = posterior.sample(200000, make_generator(2))
    torch.testing.assert_close(torch.cov(draws.T), torch.linalg.inv(precision), atol=0.01,
                               rtol=0)
    torch.testing.assert_close(draws.mean(0), posterior.mean, atol=0.01, rtol=0)
