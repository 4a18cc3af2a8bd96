"""VOGGN, LGVA and OGGN (GGN thesis, Chapter 4): Theorem 4.1 (one update is an exact Bayesian
linear regression posterior), OGGN at gamma = 1 at a stationary point is the Laplace-GGN, the
method adapters, and bad settings as one-line errors."""

from __future__ import annotations

import math

import pytest
import torch

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.laplace.ggn_laplace import laplace_ggn_precision
from bench.methods.laplace.ggn_methods import LaplaceGGN
from bench.methods.variational.ggn_natural_gradient import (
    ALGORITHMS,
    NaturalGradientGGN,
    NaturalGradientState,
    NaturalGradientTrace,
    ggn_pseudo_data,
    has_settled,
    natural_gradient_step,
    require_step_size,
    run_natural_gradient_vi,
)
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood
from bench.predictive.categorical import Categorical
from bench.predictive.densities import Gaussian
from bench.training.stopping import StoppingRule, forgetting_iterations
from tests.unit.methods.test_ggn_laplace import (
    DELTA,
    LIKELIHOODS,
    NOISE,
    TINY,
    random_theta,
    stationary_theta,
    toy_data,
)

STEP = 0.7


def random_state(seed: int) -> NaturalGradientState:
    """A mean near the initialisation and a random SPD precision (not isotropic)."""
    generator = make_generator(seed)
    mean = random_theta(seed)
    p = mean.shape[0]
    factor = torch.randn(p, p, generator=generator, dtype=torch.float64) / p**0.5
    precision = factor @ factor.T + 2 * torch.eye(p, dtype=torch.float64)
    return NaturalGradientState(mean, precision, torch.linalg.cholesky(precision))


def blr_posterior(prior_eta, prior_precision, features, targets, noise):
    """Exact BLR: precision and mean of N(theta | ...) given targets = features theta + eps."""
    precision = prior_precision + features.T @ (features / noise.unsqueeze(1))
    eta = prior_eta + features.T @ (targets / noise)
    return torch.linalg.solve(precision, eta), precision


@pytest.mark.parametrize("likelihood", sorted(LIKELIHOODS))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_theorem_4_1_one_update_is_the_exact_blr_posterior(algorithm, likelihood):
    x, y = toy_data(likelihood)
    lik = LIKELIHOODS[likelihood]
    state = random_state(1)
    samples = 3
    f_hat, jacobians = ggn_pseudo_data(algorithm, TINY, state, x, samples, make_generator(4))
    s = f_hat.shape[0]
    assert s == (1 if algorithm == "oggn" else samples)
    new = natural_gradient_step(state, f_hat, jacobians, y, lik, DELTA, STEP)

    eye = torch.eye(state.mean.shape[0], dtype=torch.float64)
    prior_precision = (1 - STEP) * state.precision + STEP * DELTA * eye
    prior_eta = (1 - STEP) * state.precision @ state.mean
    features, targets, noise = [], [], []
    for f_s, j_s in zip(f_hat, jacobians, strict=True):
        if likelihood == "bernoulli":
            lam = lik.hessian(f_s)
            features.append(j_s * lam.unsqueeze(1))
            targets.append(y - lik.mean(f_s) + lam * (j_s @ state.mean))
            noise.append(s / STEP * lam)
        else:
            features.append(j_s)
            targets.append(y - f_s + j_s @ state.mean)
            noise.append(torch.full_like(y, s / STEP * NOISE))
    mean, precision = blr_posterior(prior_eta, prior_precision, torch.cat(features),
                                    torch.cat(targets), torch.cat(noise))
    torch.testing.assert_close(new.precision, precision, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(new.mean, mean, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(new.precision_cholesky @ new.precision_cholesky.T, precision,
                               rtol=1e-10, atol=1e-10)


def test_pseudo_data_rules_of_table_4_2():
    x, _ = toy_data("gaussian")
    state = random_state(2)
    mean = state.mean
    f_lgva, j_lgva = ggn_pseudo_data("lgva", TINY, state, x, 2, make_generator(7))
    f_voggn, j_voggn = ggn_pseudo_data("voggn", TINY, state, x, 2, make_generator(7))
    thetas = state.posterior.sample(2, make_generator(7))
    for s in range(2):
        torch.testing.assert_close(f_voggn[s], TINY.forward_1d(thetas[s], x))
        torch.testing.assert_close(j_voggn[s], TINY.jacobian(thetas[s], x))
        torch.testing.assert_close(j_lgva[s], TINY.jacobian(mean, x))
        torch.testing.assert_close(f_lgva[s], TINY.forward_1d(mean, x)
                                   + TINY.jacobian(mean, x) @ (thetas[s] - mean))
    f_oggn, j_oggn = ggn_pseudo_data("oggn", TINY, state, x, 5, make_generator(7))
    torch.testing.assert_close(f_oggn[0], TINY.forward_1d(mean, x))
    torch.testing.assert_close(j_oggn[0], TINY.jacobian(mean, x))


@pytest.mark.parametrize("likelihood", sorted(LIKELIHOODS))
def test_oggn_with_unit_step_at_a_stationary_point_is_the_laplace_ggn(likelihood):
    theta = stationary_theta(likelihood)
    x, y = toy_data(likelihood)
    lik = LIKELIHOODS[likelihood]
    state = NaturalGradientState.isotropic(theta, 0.1)
    f_hat, jacobians = ggn_pseudo_data("oggn", TINY, state, x, 1, make_generator(0))
    new = natural_gradient_step(state, f_hat, jacobians, y, lik, DELTA, 1.0)
    f = TINY.forward_1d(theta, x)
    laplace = laplace_ggn_precision(TINY.jacobian(theta, x), lik.hessian(f), DELTA)
    torch.testing.assert_close(new.precision, laplace, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(new.mean, theta, rtol=0, atol=1e-6)


@pytest.mark.parametrize("bad", [0, 0.0, -0.5, 1.5, True, "half"])
def test_step_size_outside_zero_one_is_a_one_line_error(bad):
    with pytest.raises(ConfigError, match=r"method.step_size=.*\(0, 1\]"):
        require_step_size("method.step_size", bad)
    with pytest.raises(ConfigError, match="method.step_size"):
        NaturalGradientGGN(step_size=bad)


def test_unknown_algorithm_and_non_positive_settings_name_the_key():
    with pytest.raises(ConfigError, match="method.algorithm='sgd'.*voggn, lgva, oggn"):
        NaturalGradientGGN(algorithm="sgd")
    with pytest.raises(ConfigError, match="method.prior_precision"):
        NaturalGradientGGN(prior_precision=0.0)
    with pytest.raises(ConfigError, match="method.noise_variance"):
        LaplaceGGN(noise_variance=-1.0)
    with pytest.raises(ConfigError, match="method.likelihood"):
        LaplaceGGN(likelihood="poisson")
    with pytest.raises(ConfigError, match="method.predictive"):
        LaplaceGGN(likelihood="bernoulli", predictive="blr")
    assert require_step_size("method.step_size", 1) == 1.0


@pytest.mark.parametrize("likelihood", sorted(LIKELIHOODS))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_method_adapters_fit_predict_and_repeat_bit_for_bit(algorithm, likelihood):
    x, y = toy_data(likelihood)
    data = TrainingSet(x, y)
    settings = dict(likelihood=likelihood, prior_precision=DELTA, noise_variance=NOISE,
                    hidden=(6, 6), n_predictive_samples=50)
    first = NaturalGradientGGN(algorithm=algorithm, iterations=15, **settings)
    diagnostics = first.fit(data, seed=3)
    assert diagnostics["iterations"] == 15
    assert all(map(math.isfinite, first.trace.train_nll + first.trace.log_det_precision))
    if algorithm == "oggn":  # deterministic (damped) Gauss-Newton: the MAP objective falls
        network, lik = first.model.network, first.model.likelihood
        start = first.initial_mean(network, 3)

        def objective(theta):
            return float(-lik.log_prob(network.forward_1d(theta, x), y).sum()
                         + 0.5 * DELTA * theta @ theta)

        assert objective(first.model.posterior.mean) < objective(start)
    second = NaturalGradientGGN(algorithm=algorithm, iterations=15, **settings)
    second.fit(data, seed=3)
    torch.testing.assert_close(first.draws, second.draws, rtol=0, atol=0)
    x_new = torch.linspace(-3, 3, 4, dtype=torch.float64).unsqueeze(1)
    predictive = first.predict(x_new)
    if likelihood == "bernoulli":
        assert isinstance(predictive, Categorical) and predictive.probs.shape == (4, 2)
    else:
        mean, variance = first.model.glm_function_moments(x_new)
        assert isinstance(predictive, Gaussian)
        torch.testing.assert_close(predictive.variance, variance + NOISE)


def test_laplace_ggn_method_reports_stationarity_and_evidence():
    x, y = toy_data("gaussian")
    method = LaplaceGGN(likelihood="gaussian", prior_precision=DELTA, noise_variance=NOISE,
                        hidden=(6, 6), lr=1e-2, steps=3000, n_predictive_samples=20)
    diagnostics = method.fit(TrainingSet(x, y), seed=0)
    assert diagnostics["gradient_norm"] < 1e-1
    assert diagnostics["blr_mean_shift"] < 1e-2
    assert diagnostics["n_params"] == TINY.n_params
    torch.testing.assert_close(method.model.posterior.mean, method.model.linearisation_point)
    nn = method.function_samples(x, "nn")
    glm = method.function_samples(x, "glm")
    assert nn.shape == glm.shape == (20, len(y))
    assert isinstance(method.model.likelihood, GaussianLikelihood)
    assert not isinstance(method.model.likelihood, BernoulliLikelihood)


@pytest.mark.parametrize("likelihood", sorted(LIKELIHOODS))
def test_damped_oggn_stops_once_settled_on_the_prefix_of_the_full_run(likelihood):
    x, y = toy_data(likelihood)
    lik = LIKELIHOODS[likelihood]
    start = random_theta(0)
    settings = dict(step_size=0.1, initial_variance=0.1, mc_samples=1)
    rule = StoppingRule(window=10, tolerance=1e-3)
    stopped_state, stopped = run_natural_gradient_vi(
        "oggn", TINY, x, y, lik, DELTA, start, iterations=400, generator=make_generator(0),
        stopping=rule, **settings)
    full_state, full = run_natural_gradient_vi(
        "oggn", TINY, x, y, lik, DELTA, start, iterations=400, generator=make_generator(0),
        **settings)
    k = len(stopped.train_nll)
    assert forgetting_iterations(0.1, 1e-3) == 66 and forgetting_iterations(1.0, 1e-3) == 1
    assert max(rule.window, 66) <= k < 400 and has_settled(stopped, rule, 0.1)
    assert rule.settled(stopped.train_nll) and 0.9**k <= 1e-3
    assert not any(has_settled(NaturalGradientTrace(stopped.mean_change[:j],
                                                    stopped.log_det_precision[:j],
                                                    stopped.train_nll[:j]), rule, 0.1)
                   for j in range(k))
    assert stopped.train_nll == full.train_nll[:k]  # deterministic: the same iterates
    assert len(full.train_nll) == 400
    # stopping lost (almost) nothing: the 400-iteration run ends at nearly the same fit
    assert abs(full.train_nll[-1] - stopped.train_nll[-1]) <= 1e-2 * abs(full.train_nll[-1])
    assert stopped.train_nll[-1] < 0.5 * stopped.train_nll[0]
    torch.testing.assert_close(full_state.mean, stopped_state.mean, rtol=0, atol=0.5)


def test_stopping_settings_reach_the_method_and_are_checked():
    x, y = toy_data("gaussian")
    method = NaturalGradientGGN(algorithm="oggn", likelihood="gaussian", prior_precision=DELTA,
                                noise_variance=NOISE, hidden=(6, 6), step_size=0.1,
                                iterations=300, stop_window=10, stop_tolerance=1e-3,
                                n_predictive_samples=5)
    diagnostics = method.fit(TrainingSet(x, y), seed=1)
    assert diagnostics["converged"] and diagnostics["iterations"] < 300
    assert diagnostics["train_nll_band"] <= 1e-3 and diagnostics["iterations"] >= 66
    assert diagnostics["log_det_precision_band"] >= 0
    unstopped = NaturalGradientGGN(algorithm="oggn", iterations=3, n_predictive_samples=5)
    assert "converged" not in unstopped.fit(TrainingSet(x, y), seed=1)
    with pytest.raises(ConfigError, match="method.stop_window=20 .* method.iterations=10"):
        NaturalGradientGGN(iterations=10, stop_window=20, stop_tolerance=1e-3)
    with pytest.raises(ConfigError, match="method.stop_tolerance"):
        NaturalGradientGGN(stop_window=5)


def test_laplace_ggn_polish_reaches_a_stationary_map():
    x, y = toy_data("bernoulli")
    settings = dict(likelihood="bernoulli", prior_precision=DELTA, hidden=(6, 6), lr=1e-2,
                    steps=200, n_predictive_samples=5)
    rough = LaplaceGGN(**settings).fit(TrainingSet(x, y), seed=0)
    method = LaplaceGGN(polish_iterations=2000, polish_tolerance=1e-6, **settings)
    polished = method.fit(TrainingSet(x, y), seed=0)
    assert polished["adam_gradient_norm"] == pytest.approx(rough["gradient_norm"])
    assert rough["gradient_norm"] > 1e-2 and polished["gradient_norm"] < 1e-5
    assert 0 < polished["polish_iterations"] <= 2000
    # at a stationary theta* eq. 3.12's BLR mean is theta* itself
    assert polished["blr_mean_shift"] < 1e-5 < rough["blr_mean_shift"]
    with pytest.raises(ConfigError, match="method.polish_tolerance"):
        LaplaceGGN(polish_iterations=10, polish_tolerance=0.0)
