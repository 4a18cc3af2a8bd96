"""Known answers for VOGGN, LGVA and OGGN (GGN thesis, Chapter 4) on a linear model with bias
(``MLPShape((2, 1))``: ``f = x w + b``, ``J = [x, 1]``), float64, iterated here by calling
``ggn_pseudo_data`` and ``natural_gradient_step`` directly:

* Bayesian linear regression: OGGN at ``gamma = 1`` is the exact posterior in one step; at
  ``gamma < 1`` the precision error is ``(1 - gamma)^t`` times the initial one and the mean
  converges to the posterior mean; VOGGN and LGVA (``S = 1``) have the same precision, and their
  mean iterates are a Gaussian AR(1) around the posterior mean (time average and spread checked
  against Monte Carlo bounds derived in the tests);
* Bayesian logistic regression: OGGN at ``gamma = 1`` is Newton's method to the MAP; VOGGN at
  a small step reaches the Gaussian-VI optimum, found here by maximising the ELBO (Gauss-Hermite
  per data point) over the mean and a Cholesky factor of the covariance by Newton's method.

Each test fails when the update is broken (mean step's sign, forgetting factor, VOGGN's draw,
the prior term in the mean direction).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from bench.harness.rng import make_generator
from bench.methods.variational.ggn_natural_gradient import (
    NaturalGradientState,
    ggn_pseudo_data,
    natural_gradient_step,
)
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood, Likelihood
from bench.models.mlp import MLPShape

LINEAR = MLPShape((2, 1), "tanh")  # no hidden layer: f = x w + b, jacobian [x, 1]
P = LINEAR.n_params
EYE = torch.eye(P, dtype=torch.float64)
BLR_DELTA = 5.0
BLR_NOISE = 0.5
LOGISTIC_DELTA = 1.0
# Probability, for a fixed seed, that a Monte Carlo check fails although the update is right.
FALSE_ALARM = 1e-6
FIVE_SIGMA = 5.0  # two-sided normal tail 5.7e-7, matching FALSE_ALARM
CHI2_3_QUANTILE = 30.665  # scipy.stats.chi2.ppf(1 - FALSE_ALARM, 3) (scipy.stats: 1.4 s import)
# VOGGN's bias from the Gaussian-VI optimum of the logistic regression below, per unit of
# gamma / S: mean in the V*^-1 norm, precision in relative Frobenius norm (measured, see the
# test's docstring).
VOGGN_MEAN_BIAS = 0.24
VOGGN_PRECISION_BIAS = 0.033
# Nodes and weights for E over N(0, 1) of the ELBO (60 points agree with 120 to 1e-14 in the
# optimum); the positions of the covariance factor's lower triangle in the ELBO's parameters.
GAUSS_HERMITE = np.polynomial.hermite.hermgauss(60)
LOWER = torch.tril_indices(P, P)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def assert_near(actual: torch.Tensor, expected: torch.Tensor, atol: float,
                rtol: float = 0.0) -> None:
    """``|actual - expected| <= atol + rtol |expected|`` entrywise (``torch.testing``'s first
    call imports ``torch.distributed.tensor``, seconds for 3 x 3 comparisons)."""
    assert actual.shape == expected.shape
    deviation = (actual - expected).abs()
    assert bool((deviation <= atol + rtol * expected.abs()).all()), (
        f"largest deviation {float(deviation.max()):.3e} (atol {atol:g}, rtol {rtol:g})")


def design(x: torch.Tensor) -> torch.Tensor:
    """``[x, 1]``: the linear model's jacobian, written without the network."""
    return torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], dim=1)


@functools.cache
def regression_data(n: int = 30) -> tuple[torch.Tensor, torch.Tensor]:
    """``y = x w + b + eps`` with ``eps ~ N(0, BLR_NOISE)``, ``x ~ N(0, I_2)``."""
    generator = make_generator(5)
    x = torch.randn(n, 2, generator=generator, dtype=torch.float64)
    noise = BLR_NOISE**0.5 * torch.randn(n, generator=generator, dtype=torch.float64)
    return x, x @ torch.tensor([1.0, -2.0], dtype=torch.float64) + 0.5 + noise


@functools.cache
def classification_data(n: int = 50) -> tuple[torch.Tensor, torch.Tensor]:
    """Labels drawn from ``Bernoulli(s(1.5 x_1 - x_2 + 0.5))``: overlapping classes."""
    generator = make_generator(11)
    x = torch.randn(n, 2, generator=generator, dtype=torch.float64)
    logits = x @ torch.tensor([1.5, -1.0], dtype=torch.float64) + 0.5
    y = (torch.rand(n, generator=generator, dtype=torch.float64) < torch.sigmoid(logits))
    return x, y.to(torch.float64)


def exact_blr_posterior() -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and precision of ``N(theta | 0, BLR_DELTA^-1 I)`` times the Gaussian likelihood."""
    x, y = regression_data()
    features = design(x)
    precision = BLR_DELTA * EYE + features.T @ features / BLR_NOISE
    return torch.linalg.solve(precision, features.T @ y / BLR_NOISE), precision


def iterate(algorithm: str, likelihood: Likelihood, x: torch.Tensor, y: torch.Tensor,
            prior_precision: float, step_size: float, iterations: int,
            start: NaturalGradientState, mc_samples: int = 1,
            seed: int = 0) -> list[NaturalGradientState]:
    """The states ``[q_0, ..., q_iterations]`` of ``iterations`` updates from ``start``."""
    generator = make_generator(seed)
    states = [start]
    with torch.no_grad():
        for _ in range(iterations):
            f_hat, jacobians = ggn_pseudo_data(algorithm, LINEAR, states[-1], x, mc_samples,
                                               generator)
            states.append(natural_gradient_step(states[-1], f_hat, jacobians, y, likelihood,
                                                prior_precision, step_size))
    return states


def blr_start() -> NaturalGradientState:
    """``N((1, 1, 1), I)``: far from the posterior in mean and precision."""
    return NaturalGradientState.isotropic(torch.ones(P, dtype=torch.float64), 1.0)


def assert_forgets_at_rate(states: list[NaturalGradientState], precision: torch.Tensor,
                           step_size: float) -> None:
    """``Lambda_t - Lambda* = (1 - gamma)^t (Lambda_0 - Lambda*)`` for every state."""
    errors = torch.stack([state.precision for state in states]) - precision
    decay = (1 - step_size) ** torch.arange(len(states), dtype=torch.float64)
    assert_near(errors, decay[:, None, None] * errors[0], atol=1e-10)


def test_oggn_with_unit_step_is_the_exact_blr_posterior_in_one_step():
    x, y = regression_data()
    mean, precision = exact_blr_posterior()
    states = iterate("oggn", GaussianLikelihood(BLR_NOISE), x, y, BLR_DELTA, 1.0, 1, blr_start())
    assert_near(states[1].precision, precision, atol=1e-10, rtol=1e-12)
    assert_near(states[1].mean, mean, atol=1e-10)


@pytest.mark.parametrize("step_size", [0.5, 0.1])
def test_damped_oggn_forgets_the_start_at_rate_one_minus_step(step_size):
    """``Lambda_t - Lambda* = (1 - gamma)^t (Lambda_0 - Lambda*)`` exactly; the mean error
    contracts by ``I - gamma Lambda_{t+1}^-1 Lambda*`` -> ``(1 - gamma) I``."""
    x, y = regression_data()
    mean, precision = exact_blr_posterior()
    iterations = 60 if step_size == 0.5 else 320  # (1 - gamma)^t < 1e-14
    states = iterate("oggn", GaussianLikelihood(BLR_NOISE), x, y, BLR_DELTA, step_size,
                     iterations, blr_start())
    assert_forgets_at_rate(states, precision, step_size)
    errors = torch.stack([(state.precision - precision).norm() for state in states[:12]])
    ratios = errors[1:] / errors[:-1]
    assert_near(ratios, torch.full_like(ratios, 1 - step_size), atol=0, rtol=1e-9)
    assert float((states[1].mean - mean).norm()) > 1e-2  # the mean does move there
    assert_near(states[-1].mean, mean, atol=1e-10)
    assert_near(states[-1].precision, precision, atol=1e-10, rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["voggn", "lgva"])
@pytest.mark.second_tier
def test_sampling_algorithms_on_blr_are_an_ar1_around_the_exact_posterior(algorithm):
    """With ``J = X`` the curvature ``H = X^T X / sigma^2`` is the same for every draw, so the
    precision is OGGN's: ``Lambda* + (1 - gamma)^t (Lambda_0 - Lambda*)``. Once it has
    converged (``C = Lambda*^-1``), with ``theta_s = mu_t + eps_t``, ``eps_t ~ N(0, C)``:
    ``e_{t+1} = mu_{t+1} - mu* = (1 - gamma) e_t - gamma C H eps_t``, a Gaussian AR(1) with
    ``rho = 1 - gamma`` and stationary covariance
    ``Sigma_e = gamma^2 C H C H C / (1 - rho^2) = gamma / (2 - gamma) M``,
    ``M = C H C H C = (I - delta C) C (I - delta C)`` (the prior enters at ``mu_t``, not at
    the draw, so ``M < C``: ``tr M = 0.83 tr C`` here, which the spread check tells apart).
    For a linear model LGVA's pseudo-data ``f(mu) + J (theta_s - mu)`` are VOGGN's
    ``X theta_s``, so both follow this recursion with the same draws.

    * Time average of ``T`` stationary iterates: Gaussian with covariance ``k_T Sigma_e``,
      ``k_T = [T (1 + rho) / (1 - rho) - 2 rho (1 - rho^T) / (1 - rho)^2] / T^2`` (about
      ``M / T``), so its squared Mahalanobis norm is chi-square(3): bound at the
      ``1 - FALSE_ALARM`` quantile.
    * Spread ``tr(1/T sum_t e_t e_t^T)``: mean ``tr Sigma_e`` and, since
      ``Cov(|e_t|^2, |e_{t+k}|^2) = 2 rho^2k tr Sigma_e^2``, standard deviation
      ``sqrt(2 tr(Sigma_e^2) (1 + rho^2) / ((1 - rho^2) T))``: bound at five of them.
    """
    step_size, burn_in, samples = 0.5, 60, 4000  # 0.5^60: the start is forgotten
    x, y = regression_data()
    mean, precision = exact_blr_posterior()
    states = iterate(algorithm, GaussianLikelihood(BLR_NOISE), x, y, BLR_DELTA, step_size,
                     burn_in + samples, blr_start(), seed=1)
    assert_forgets_at_rate(states, precision, step_size)

    covariance = torch.linalg.inv(precision)
    shrink = EYE - BLR_DELTA * covariance
    stationary = step_size / (2 - step_size) * shrink @ covariance @ shrink
    rho = 1 - step_size
    k_t = (samples * (1 + rho) / (1 - rho)
           - 2 * rho * (1 - rho**samples) / (1 - rho) ** 2) / samples**2
    errors = torch.stack([state.mean for state in states[burn_in + 1:]]) - mean
    average = errors.mean(0)
    mahalanobis = float(average @ torch.linalg.solve(k_t * stationary, average))
    assert mahalanobis < CHI2_3_QUANTILE

    spread = float(torch.einsum("ti,ti->", errors, errors)) / samples
    expected = float(torch.trace(stationary))
    spread_sd = math.sqrt(2 * float(torch.trace(stationary @ stationary)) * (1 + rho**2)
                          / ((1 - rho**2) * samples))
    assert abs(spread - expected) < FIVE_SIGMA * spread_sd
    hinted = step_size / (2 - step_size) * float(torch.trace(covariance))
    assert FIVE_SIGMA * spread_sd < 0.5 * (hinted - expected)  # the check tells M from C


def newton_iterates(x: torch.Tensor, y: torch.Tensor, start: torch.Tensor,
                    iterations: int) -> list[torch.Tensor]:
    """Newton's method on the log joint of Bayesian logistic regression: gradient
    ``X^T (y - s(X w)) - delta w``, negative Hessian ``X^T diag(s (1 - s)) X + delta I``."""
    features = design(x)
    iterates = [start]
    for _ in range(iterations):
        w = iterates[-1]
        s = torch.sigmoid(features @ w)
        gradient = features.T @ (y - s) - LOGISTIC_DELTA * w
        hessian = features.T @ (features * (s * (1 - s)).unsqueeze(1)) + LOGISTIC_DELTA * EYE
        iterates.append(w + torch.linalg.solve(hessian, gradient))
    return iterates


def test_oggn_with_unit_step_is_newtons_method_on_logistic_regression():
    x, y = classification_data()
    features = design(x)
    start = NaturalGradientState.isotropic(torch.zeros(P, dtype=torch.float64), 0.1)
    states = iterate("oggn", BernoulliLikelihood(), x, y, LOGISTIC_DELTA, 1.0, 10, start)
    newton = newton_iterates(x, y, start.mean, 10)
    assert_near(torch.stack([state.mean for state in states]), torch.stack(newton), atol=1e-12,
                rtol=1e-10)
    w_map = states[-1].mean
    s = torch.sigmoid(features @ w_map)
    assert float((features.T @ (y - s) - LOGISTIC_DELTA * w_map).norm()) < 1e-10
    assert 0.6 < float(((s > 0.5) == (y > 0.5)).double().mean()) < 1  # not separated
    hessian = features.T @ (features * (s * (1 - s)).unsqueeze(1)) + LOGISTIC_DELTA * EYE
    assert_near(states[-1].precision, hessian, atol=1e-10)


def gauss_hermite_expectation(function: Callable[[torch.Tensor], torch.Tensor],
                              mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    """``E[function(f)]`` for ``f ~ N(mean, variance)`` per entry (60-point Gauss-Hermite)."""
    nodes = torch.tensor(GAUSS_HERMITE[0], dtype=torch.float64) * math.sqrt(2)
    weights = torch.tensor(GAUSS_HERMITE[1], dtype=torch.float64) / math.sqrt(math.pi)
    f = mean.unsqueeze(1) + variance.sqrt().unsqueeze(1) * nodes
    return (function(f) * weights).sum(1)


def negative_elbo(parameters: torch.Tensor) -> torch.Tensor:
    """``-E_q[log p(y | theta)] + KL(q || N(0, delta^-1 I))`` for ``q = N(m, L L^T)``,
    ``parameters = (m, lower triangle of L)``; ``f_i = x_i^T theta ~ N(x_i^T m, |L^T x_i|^2)``
    and ``log p(y_i | f_i) = log s((2 y_i - 1) f_i)``."""
    x, y = classification_data()
    features = design(x)
    mean, factor = unpack(parameters)
    sign = (2 * y - 1).unsqueeze(1)
    expected_log_lik = gauss_hermite_expectation(
        lambda f: -torch.nn.functional.softplus(-sign * f), features @ mean,
        ((features @ factor) ** 2).sum(1)).sum()
    kl = 0.5 * (LOGISTIC_DELTA * ((factor**2).sum() + mean @ mean) - P
                - P * math.log(LOGISTIC_DELTA) - (factor.diagonal() ** 2).log().sum())
    return kl - expected_log_lik


def unpack(parameters: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean and the lower-triangular factor ``L`` of the covariance ``L L^T``."""
    factor = torch.zeros(P, P, dtype=parameters.dtype)
    return parameters[:P], factor.index_put((LOWER[0], LOWER[1]), parameters[P:])


def elbo_gradient_and_hessian(parameters: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient and Hessian of :func:`negative_elbo` by plain autograd (``torch.func``,
    ``torch.optim`` and the double backward of ``abs`` import ``torch._dynamo``: seconds)."""
    parameters = parameters.detach().requires_grad_(True)
    (gradient,) = torch.autograd.grad(negative_elbo(parameters), parameters, create_graph=True)
    hessian = torch.stack([torch.autograd.grad(component, parameters, retain_graph=True)[0]
                           for component in gradient])
    return gradient.detach(), hessian


@functools.cache
def gaussian_vi_optimum() -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and precision of the ELBO's maximiser: Newton's method with backtracking from the
    prior (the negative ELBO of a log-concave likelihood is convex in ``(m, L)``)."""
    parameters = torch.cat([torch.zeros(P, dtype=torch.float64),
                            EYE[LOWER[0], LOWER[1]] / LOGISTIC_DELTA**0.5])
    with torch.no_grad():
        for _ in range(50):
            with torch.enable_grad():
                gradient, hessian = elbo_gradient_and_hessian(parameters)
            if float(gradient.norm()) < 1e-12:
                break
            step = torch.linalg.solve(hessian, gradient)
            length, current = 1.0, negative_elbo(parameters)
            while not negative_elbo(parameters - length * step) <= current and length > 1e-8:
                length /= 2
            parameters = parameters - length * step
    assert float(elbo_gradient_and_hessian(parameters)[0].norm()) < 1e-10
    mean, factor = unpack(parameters)
    return mean, torch.cholesky_inverse(factor)


@pytest.mark.second_tier
def test_voggn_with_small_step_reaches_the_gaussian_vi_optimum_of_logistic_regression():
    """The optimum ``N(m*, V*)`` is stationary in ``m`` and ``V``:
    ``X^T E_q[y - s(f)] = delta m`` and ``V^-1 = delta I + X^T diag(E_q[s'(f)]) X``, the
    fixed point of VOGGN's mean and GGN precision (for logistic regression the GGN is the
    Hessian). Tolerances, in the ``V*^-1`` norm for the mean and relative Frobenius for the
    precision, are Monte Carlo error plus bias:

    * MC, mean: linearised at the optimum, the mean error is an AR(1) with ``rho = 1 - gamma``
      driven by ``gamma V* (g_hat - E g_hat)``, so the time average of ``T`` iterates has
      covariance about ``V* Cov(g_hat) V* / T``; ``Cov(g_hat) ~ H V* H / S`` (delta method,
      ``H = V*^-1 - delta I``), so that is at most ``V* / (S T)``: squared norm below the
      chi-square(3) quantile over ``S T``;
    * MC, precision: the time-averaged precision is ``delta I`` plus the average of the
      ``S T`` curvatures ``H_s = X^T diag(s'(f_s)) X``; with ``v = E|H_s - E H_s|_F^2``
      (from draws of ``q*`` here) the squared Frobenius error has mean ``v / (S T)`` and
      exceeds 25 times that with probability at most ``P(chi2_1 > 25) = 5.7e-7`` (all the
      variance along one direction is the worst case). Conservative: the draws feed back
      through the precision and consecutive curvatures are anticorrelated (block means over
      100 iterations measured 0.2-0.4 times the independent-draw variance);
    * bias: ``O(gamma / S)``, the order of the iterates' spread and of the precision's
      fluctuation; 3 runs of 20000 iterations at ``gamma = 0.1``, ``S = 1`` measured 0.024
      (mean) and 3.3e-3 (precision), i.e. ``gamma / S`` times :data:`VOGGN_MEAN_BIAS` and
      :data:`VOGGN_PRECISION_BIAS` (the same runs at ``S = 20`` measured 1/20 of it); the
      allowance is 2.5 times that.
    """
    step_size, mc_samples, burn_in, samples = 0.05, 10, 300, 2000  # 0.95^300 = 2e-7
    x, y = classification_data()
    features = design(x)
    mean, precision = gaussian_vi_optimum()
    covariance = torch.linalg.inv(precision)
    f_mean, f_var = features @ mean, torch.einsum("ni,ij,nj->n", features, covariance, features)
    assert_near(
        features.T @ (y - gauss_hermite_expectation(torch.sigmoid, f_mean, f_var)),
        LOGISTIC_DELTA * mean, atol=1e-9)
    curvature = gauss_hermite_expectation(lambda f: torch.sigmoid(f) * torch.sigmoid(-f),
                                          f_mean, f_var)
    assert_near(
        precision, LOGISTIC_DELTA * EYE + features.T @ (features * curvature.unsqueeze(1)),
        atol=1e-9)

    draws = samples * mc_samples
    mean_tolerance = (math.sqrt(CHI2_3_QUANTILE / draws)
                      + 2.5 * VOGGN_MEAN_BIAS * step_size / mc_samples)
    thetas = mean + torch.randn(20000, P, generator=make_generator(3),
                                dtype=torch.float64) @ torch.linalg.cholesky(covariance).T
    s = torch.sigmoid(thetas @ features.T)
    curvatures = torch.einsum("sn,ni,nj->sij", s * (1 - s), features, features)
    curvature_sd = float(((curvatures - curvatures.mean(0)) ** 2).sum((1, 2)).mean()) ** 0.5
    scale = float(precision.norm())
    precision_tolerance = (FIVE_SIGMA * curvature_sd / math.sqrt(draws) / scale
                           + 2.5 * VOGGN_PRECISION_BIAS * step_size / mc_samples)

    start = NaturalGradientState.isotropic(torch.zeros(P, dtype=torch.float64),
                                           1 / LOGISTIC_DELTA)
    states = iterate("voggn", BernoulliLikelihood(), x, y, LOGISTIC_DELTA, step_size,
                     burn_in + samples, start, mc_samples=mc_samples, seed=2)[burn_in + 1:]
    error = torch.stack([state.mean for state in states]).mean(0) - mean
    assert float(error @ precision @ error) ** 0.5 < mean_tolerance
    average_precision = torch.stack([state.precision for state in states]).mean(0)
    assert float((average_precision - precision).norm()) / scale < precision_tolerance

    # the tolerances tell the VI optimum from the MAP and the Laplace-GGN precision
    w_map = newton_iterates(x, y, torch.zeros(P, dtype=torch.float64), 10)[-1]
    s_map = torch.sigmoid(features @ w_map)
    laplace = features.T @ (features * (s_map * (1 - s_map)).unsqueeze(1)) + LOGISTIC_DELTA * EYE
    assert float((w_map - mean) @ precision @ (w_map - mean)) ** 0.5 > 4 * mean_tolerance
    assert float((laplace - precision).norm()) / scale > 4 * precision_tolerance
