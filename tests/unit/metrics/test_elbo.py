"""The one ELBO definition (:mod:`bench.metrics.elbo`) against closed forms.

* The KL to the prior of every q form (the precision form of VOGGN / LGVA / OGGN and the
  Laplace-GGN, the covariance forms of the reference VI's guides) against
  ``torch.distributions.kl_divergence``.
* Bayesian linear regression (the linear 'network' and data of the known-answer tests): at the
  exact posterior the ELBO is the log evidence, ``log N(y | 0, X X^T / delta + sigma^2 I)``.
  The project's ELBO estimates the likelihood term by Monte Carlo for every network (no
  closed form exists for the nonlinear ones, and one definition is what makes the fits
  comparable), so the test takes two steps: the KL the module computes plus the expected log
  likelihood in closed form (written here, ``log N(y | X m, sigma^2) - tr(X C X^T) / 2
  sigma^2``) equals the evidence to rounding; the Monte Carlo estimate lies within five of its
  standard errors of it, and the standard error it reports matches the closed-form standard
  deviation of the log likelihood over q.
* Bayesian logistic regression: at the Gaussian-VI optimum that the known-answer test finds by
  Gauss-Hermite quadrature and Newton's method, the estimate lies within five standard errors
  of the quadrature ELBO.
* Nonlinear networks: the ELBO of a VOGGN-style state and of a Laplace-GGN posterior on a tanh
  net against an estimate from an independent sampler.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import MultivariateNormal, kl_divergence

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.laplace.ggn_laplace import GaussianPosterior, laplace_ggn_posterior
from bench.methods.variational.covariance_gaussian import CovarianceGaussian
from bench.methods.variational.ggn_natural_gradient import NaturalGradientState
from bench.metrics.elbo import (
    fitted_posterior_elbo,
    gaussian_elbo,
    kl_to_isotropic_prior,
    log_likelihoods,
)
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood
from tests.unit.methods.test_ggn_known_answers import (
    BLR_DELTA,
    BLR_NOISE,
    LINEAR,
    LOGISTIC_DELTA,
    LOWER,
    classification_data,
    design,
    exact_blr_posterior,
    gaussian_vi_optimum,
    negative_elbo,
    regression_data,
)
from tests.unit.methods.test_ggn_laplace import DELTA, LIKELIHOODS, TINY, random_theta, toy_data

FIVE_SIGMA = 5.0  # two-sided normal tail 5.7e-7: the chance a right estimate fails
# The relative standard deviation of a sample standard deviation from S draws is at most
# sqrt((kappa - 1) / 4 S) for kurtosis kappa; the log likelihood of a linear Gaussian model is
# a quadratic form in Gaussians, whose kurtosis is at most chi-square(1)'s, 15.
QUADRATIC_FORM_KURTOSIS = 15.0


def log_evidence(x: torch.Tensor, y: torch.Tensor) -> float:
    """``log N(y | 0, X X^T / delta + sigma^2 I)``, written with ``torch.distributions``."""
    features = design(x)
    n = features.shape[0]
    covariance = (features @ features.T / BLR_DELTA
                  + BLR_NOISE * torch.eye(n, dtype=torch.float64))
    return float(MultivariateNormal(torch.zeros(n, dtype=torch.float64), covariance).log_prob(y))


def random_spd(p: int, seed: int) -> torch.Tensor:
    """A random symmetric positive definite ``p x p`` matrix."""
    factor = torch.randn(p, p, generator=make_generator(seed), dtype=torch.float64)
    return factor @ factor.T / p + 0.5 * torch.eye(p, dtype=torch.float64)


def q_forms(p: int) -> dict[str, object]:
    """One q of each form the reports show, over ``p`` parameters."""
    generator = make_generator(7)
    mean = torch.randn(p, generator=generator, dtype=torch.float64)
    precision = random_spd(p, 1)
    state = NaturalGradientState(mean, precision, torch.linalg.cholesky(precision))
    factor = torch.randn(p, 2, generator=generator, dtype=torch.float64)
    diagonal = torch.rand(p, generator=generator, dtype=torch.float64) + 0.1
    return {"natural_gradient_state": state.posterior,
            "precision": GaussianPosterior.from_precision(mean, precision),
            "full_rank": CovarianceGaussian.full_rank(mean,
                                                      torch.linalg.cholesky(random_spd(p, 2))),
            "low_rank": CovarianceGaussian(mean, factor, diagonal),
            "mean_field": CovarianceGaussian.mean_field(mean, diagonal.sqrt())}


@pytest.mark.parametrize("form", ["natural_gradient_state", "precision", "full_rank",
                                  "low_rank", "mean_field"])
def test_kl_to_the_prior_is_the_closed_form_of_every_q_form(form):
    p, delta = 5, 1.7
    q = q_forms(p)[form]
    prior = MultivariateNormal(torch.zeros(p, dtype=torch.float64),
                               torch.eye(p, dtype=torch.float64) / delta)
    expected = float(kl_divergence(MultivariateNormal(q.mean, q.covariance()), prior))
    assert abs(kl_to_isotropic_prior(q, delta) - expected) < 1e-10 * max(1.0, abs(expected))


@pytest.mark.parametrize("form", ["full_rank", "low_rank", "mean_field"])
def test_covariance_gaussian_draws_have_its_mean_and_covariance(form):
    """20000 draws: every entry of the sample mean and covariance within five standard errors
    (``Var(x_i x_j) = S_ii S_jj + S_ij^2`` for a Gaussian)."""
    n = 20000
    q = q_forms(4)[form]
    draws = q.sample(n, make_generator(3))
    covariance = q.covariance()
    variances = covariance.diagonal()
    assert bool(((draws.mean(0) - q.mean).abs()
                 < FIVE_SIGMA * (variances / n).sqrt()).all())
    centred = draws - q.mean
    entry_sd = ((variances.outer(variances) + covariance**2) / n).sqrt()
    assert bool(((centred.T @ centred / n - covariance).abs() < FIVE_SIGMA * entry_sd).all())


@pytest.mark.parametrize("form", ["full_rank", "low_rank", "mean_field"])
def test_covariance_gaussian_function_variance_is_the_diagonal_of_j_sigma_j(form):
    """The GLM predictive's ``diag(J Sigma J^T)`` against the dense covariance."""
    q = q_forms(5)[form]
    jacobian = torch.randn(7, 5, generator=make_generator(11), dtype=torch.float64)
    dense = (jacobian @ q.covariance() @ jacobian.T).diagonal()
    assert torch.allclose(q.function_variance(jacobian), dense, rtol=1e-12, atol=1e-12)


def test_elbo_at_the_exact_blr_posterior_is_the_log_evidence():
    x, y = regression_data()
    features = design(x)
    mean, precision = exact_blr_posterior()
    q = GaussianPosterior.from_precision(mean, precision)
    covariance = torch.linalg.inv(precision)
    evidence = log_evidence(x, y)

    kl = kl_to_isotropic_prior(q, BLR_DELTA)
    function_variance = torch.einsum("ni,ij,nj->n", features, covariance, features)
    at_mean = GaussianLikelihood(BLR_NOISE).log_prob(features @ mean, y).sum()
    expected_log_likelihood = float(at_mean - function_variance.sum() / (2 * BLR_NOISE))
    assert abs(expected_log_likelihood - kl - evidence) < 1e-10 * abs(evidence)

    mc_samples = 4000
    estimate = gaussian_elbo(LINEAR, x, y, GaussianLikelihood(BLR_NOISE), BLR_DELTA, q,
                             mc_samples=mc_samples, generator=make_generator(0))
    assert estimate.kl == kl
    assert abs(estimate.elbo - evidence) < FIVE_SIGMA * estimate.standard_error

    # sum_i (y_i - f_i)^2 with f ~ N(X m, X C X^T): variance 2 tr(B^2) + 4 r^T B r
    residual, spread = y - features @ mean, features @ covariance @ features.T
    variance = (2 * float(torch.trace(spread @ spread)) + 4 * float(residual @ spread @ residual)
                ) / (2 * BLR_NOISE) ** 2
    expected_se = math.sqrt(variance / mc_samples)
    relative_sd = math.sqrt((QUADRATIC_FORM_KURTOSIS - 1) / (4 * mc_samples))
    assert abs(estimate.standard_error / expected_se - 1) < FIVE_SIGMA * relative_sd


def test_elbo_at_the_logistic_vi_optimum_is_the_quadrature_elbo():
    x, y = classification_data()
    mean, precision = gaussian_vi_optimum()
    factor = torch.linalg.cholesky(torch.linalg.inv(precision))
    with torch.no_grad():
        quadrature = -float(negative_elbo(torch.cat([mean, factor[LOWER[0], LOWER[1]]])))
    estimate = gaussian_elbo(LINEAR, x, y, BernoulliLikelihood(), LOGISTIC_DELTA,
                             GaussianPosterior.from_precision(mean, precision),
                             mc_samples=4000, generator=make_generator(1))
    assert abs(estimate.elbo - quadrature) < FIVE_SIGMA * estimate.standard_error


def independent_elbo(network, x, y, likelihood, delta, mean, covariance, n: int, seed: int):
    """The ELBO by another route: draws ``mean + chol(C) z``, the network one draw at a time,
    the KL by ``torch.distributions``; (estimate, standard error)."""
    z = torch.randn(n, mean.shape[0], generator=make_generator(seed), dtype=torch.float64)
    thetas = mean + z @ torch.linalg.cholesky(covariance).T
    with torch.no_grad():
        values = torch.stack([likelihood.log_prob(network.forward_1d(t, x), y).sum()
                              for t in thetas])
    p = mean.shape[0]
    prior = MultivariateNormal(torch.zeros(p, dtype=torch.float64),
                               torch.eye(p, dtype=torch.float64) / delta)
    kl = float(kl_divergence(MultivariateNormal(mean, covariance), prior))
    return float(values.mean()) - kl, float(values.std()) / math.sqrt(n)


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli"])
@pytest.mark.second_tier
def test_elbo_of_the_reports_q_on_a_tanh_net_matches_an_independent_estimate(likelihood):
    """A Laplace-GGN posterior (through :func:`fitted_posterior_elbo`, as a report calls it)
    and a natural-gradient state with a random precision on ``1-6-6-1`` tanh."""
    x, y = toy_data(likelihood)
    lik = LIKELIHOODS[likelihood]
    model = laplace_ggn_posterior(TINY, random_theta(0), x, lik, DELTA)
    precision = random_spd(TINY.n_params, 4) * 20
    state = NaturalGradientState(random_theta(1), precision, torch.linalg.cholesky(precision))
    n = 2000
    for q, ours in ((model.posterior, fitted_posterior_elbo(model, DELTA, x, y, mc_samples=n,
                                                            seed=5)),
                    (state.posterior, gaussian_elbo(TINY, x, y, lik, DELTA, state.posterior,
                                                    mc_samples=n,
                                                    generator=make_generator(5)))):
        theirs, their_se = independent_elbo(TINY, x, y, lik, DELTA, q.mean, q.covariance(),
                                            n, 6)
        assert abs(ours.elbo - theirs) < FIVE_SIGMA * math.hypot(ours.standard_error,
                                                                 their_se)


def test_log_likelihoods_batch_the_draws_as_one_at_a_time():
    x, y = toy_data("gaussian")
    thetas = torch.stack([random_theta(seed) for seed in range(300)])
    batched = log_likelihoods(TINY, thetas, x, y, LIKELIHOODS["gaussian"])
    single = torch.stack([LIKELIHOODS["gaussian"].log_prob(TINY.forward_1d(t, x), y).sum()
                          for t in thetas])
    assert batched.shape == (300,)
    assert float((batched - single).abs().max()) < 1e-9 * float(single.abs().max())


@pytest.mark.parametrize("change, message", [
    ({"mc_samples": 1}, "elbo.mc_samples=1 is not valid"),
    ({"mc_samples": True}, "elbo.mc_samples=True is not valid"),
    ({"prior_precision": 0.0}, "prior_precision=0.0 is not valid"),
    ({"q": CovarianceGaussian.mean_field(torch.zeros(4, dtype=torch.float64),
                                         torch.ones(4, dtype=torch.float64))},
     "q is over 4 parameters but the network (2, 1) has 3"),
    ({"y": torch.zeros(5, dtype=torch.float64)}, "30 inputs but 5 targets"),
])
def test_bad_inputs_are_one_line_config_errors(change, message):
    x, y = regression_data()
    mean, precision = exact_blr_posterior()
    arguments = {"x": x, "y": y, "prior_precision": BLR_DELTA, "mc_samples": 10,
                 "q": GaussianPosterior.from_precision(mean, precision), **change}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        gaussian_elbo(LINEAR, arguments["x"], arguments["y"], GaussianLikelihood(BLR_NOISE),
                      arguments["prior_precision"], arguments["q"],
                      mc_samples=arguments["mc_samples"], generator=make_generator(0))


def test_covariance_gaussian_rejects_shapes_that_are_not_a_covariance():
    mean = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(ConfigError, match="needs a factor"):
        CovarianceGaussian(mean, torch.zeros(2, 1, dtype=torch.float64), torch.ones(3))
    with pytest.raises(ConfigError, match="needs a square factor"):
        CovarianceGaussian(mean, torch.ones(3, 1, dtype=torch.float64),
                           torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ConfigError, match="non-negative"):
        CovarianceGaussian(mean, torch.ones(3, 1, dtype=torch.float64),
                           -torch.ones(3, dtype=torch.float64))
