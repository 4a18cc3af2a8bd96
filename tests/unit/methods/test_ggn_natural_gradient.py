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
    NaturalGradientSchedule,
    NaturalGradientState,
    ggn_pseudo_data,
    natural_gradient_step,
    require_step_size,
    run_natural_gradient_vi,
)
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood
from bench.predictive.categorical import Categorical
from bench.predictive.densities import Gaussian
from bench.training.lbfgs_polish import objective_gradient
from bench.training.network_grid import negative_log_joint
from bench.training.stopping import StationarityRule, forgetting_iterations
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
    torch.testing.assert_close(new.precision, laplace.to_dense(), rtol=1e-12, atol=1e-12)
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


@pytest.mark.second_tier
def test_laplace_ggn_method_reports_stationarity_and_evidence():
    """Adam at a fixed step ends on a gradient-norm floor whose height moves with the
    arithmetic (0.006 native, 0.10 pinned after 3000 steps); the polish reaches its tolerance
    in both, and the reported norm is the objective's own (autograd)."""
    x, y = toy_data("gaussian")
    method = LaplaceGGN(likelihood="gaussian", prior_precision=DELTA, noise_variance=NOISE,
                        hidden=(6, 6), lr=1e-2, steps=1000, n_predictive_samples=20,
                        polish_iterations=200, polish_tolerance=1e-4)
    diagnostics = method.fit(TrainingSet(x, y), seed=0)
    assert diagnostics["gradient_norm"] < 1e-4 < diagnostics["adam_gradient_norm"]
    assert diagnostics["gradient_norm"] == pytest.approx(map_gradient_norm(
        method.model.linearisation_point, x, y, method.likelihood_model()), rel=1e-6)
    assert diagnostics["blr_mean_shift"] < 1e-4
    assert diagnostics["n_params"] == TINY.n_params
    torch.testing.assert_close(method.model.posterior.mean, method.model.linearisation_point)
    nn = method.function_samples(x, "nn")
    glm = method.function_samples(x, "glm")
    assert nn.shape == glm.shape == (20, len(y))
    assert isinstance(method.model.likelihood, GaussianLikelihood)
    assert not isinstance(method.model.likelihood, BernoulliLikelihood)


def map_gradient_norm(theta, x, y, likelihood):
    """|grad L(theta)| of the summed negative log joint, by autograd (independent of the
    natural-gradient code)."""
    delta = torch.tensor([DELTA], dtype=torch.float64)
    gradient = objective_gradient(
        lambda point: negative_log_joint(TINY, point.unsqueeze(0), x, y, likelihood,
                                         delta)[0], theta)
    return float(gradient.norm())


@pytest.mark.parametrize(("likelihood", "step", "tolerance"),
                         [("bernoulli", 0.3, 1e-6), ("gaussian", 0.1, 1e-3)])
@pytest.mark.second_tier
def test_damped_oggn_stops_at_a_stationary_point_on_the_prefix_of_the_full_run(
        likelihood, step, tolerance):
    x, y = toy_data(likelihood)
    lik = LIKELIHOODS[likelihood]
    start = random_theta(0)
    settings = dict(step_size=step, initial_variance=0.1, mc_samples=1)
    rule = StationarityRule(window=10, gradient_tolerance=tolerance, step_tolerance=tolerance)
    stopped_state, stopped = run_natural_gradient_vi(
        "oggn", TINY, x, y, lik, DELTA, start,
        schedule=NaturalGradientSchedule(iterations=2000, **settings),
        generator=make_generator(0), stopping=rule)
    k = len(stopped.train_nll)
    _, full = run_natural_gradient_vi(
        "oggn", TINY, x, y, lik, DELTA, start,
        schedule=NaturalGradientSchedule(iterations=k + 20, **settings),
        generator=make_generator(0))
    assert stopped.stop_reason == "stationary" and full.stop_reason == "max_iterations"
    assert max(rule.window, forgetting_iterations(step, 1e-3)) <= k < 2000
    assert stopped.train_nll == full.train_nll[:k]  # deterministic: the same iterates
    # every iterate of the last window had a small gradient, the window before did not
    assert max(stopped.gradient_norm[-rule.window:]) <= tolerance
    assert stopped.window_gradient_norm[-1] == max(stopped.gradient_norm[-rule.window:])
    assert stopped.window_gradient_norm[-2] > tolerance or stopped.window_step[-2] > tolerance
    # the stopped mean is a stationary point of the MAP objective (autograd, not the update)
    assert map_gradient_norm(stopped_state.mean, x, y, lik) <= tolerance
    assert map_gradient_norm(start, x, y, lik) > 1.0


def test_oggn_cycling_beside_a_stationary_point_is_not_called_stationary():
    """OGGN at step 0.3 on the Gaussian toy ends in a cycle: the training NLL repeats to
    1e-3 (the old NLL-band rule called it settled) while the gradient at every iterate stays
    about 0.5. The stationarity rule never stops it; at step 0.1 the same run converges."""
    x, y = toy_data("gaussian")
    lik = LIKELIHOODS["gaussian"]
    rule = StationarityRule(window=20, gradient_tolerance=1e-3, step_tolerance=1e-3)
    state, trace = run_natural_gradient_vi(
        "oggn", TINY, x, y, lik, DELTA, random_theta(0),
        schedule=NaturalGradientSchedule(0.3, 600, 0.1, 1), generator=make_generator(0),
        stopping=rule)
    last = trace.train_nll[-20:]
    assert (max(last) - min(last)) / abs(sum(last) / 20) <= 1e-3  # the NLL band is fooled
    assert trace.stop_reason == "max_iterations"
    assert min(trace.gradient_norm[-100:]) > 0.1 and min(trace.window_gradient_norm[-100:]) > 0.1
    assert map_gradient_norm(state.mean, x, y, lik) > 0.1


@pytest.mark.second_tier
def test_stopping_settings_reach_the_method_and_are_checked():
    x, y = toy_data("bernoulli")
    method = NaturalGradientGGN(algorithm="oggn", likelihood="bernoulli", prior_precision=DELTA,
                                hidden=(6, 6), step_size=0.3,
                                iterations=2000, stop_window=10, stop_gradient_tolerance=1e-6,
                                stop_step_tolerance=1e-6, n_predictive_samples=5)
    diagnostics = method.fit(TrainingSet(x, y), seed=1)
    assert diagnostics["stop_reason"] == "stationary" and diagnostics["converged"]
    assert diagnostics["iterations"] < 2000 and diagnostics["window_gradient_norm"] <= 1e-6
    assert diagnostics["final_gradient_norm"] <= 1e-6 and diagnostics["window_step"] <= 1e-6
    assert diagnostics["seconds_per_iteration"] > 0
    unstopped = NaturalGradientGGN(algorithm="oggn", iterations=3, n_predictive_samples=5)
    fitted = unstopped.fit(TrainingSet(x, y), seed=1)
    assert fitted["stop_reason"] == "max_iterations" and fitted["window_gradient_norm"] is None
    with pytest.raises(ConfigError, match="method.stop_window=20 .* method.iterations=10"):
        NaturalGradientGGN(iterations=10, stop_window=20, stop_gradient_tolerance=1e-3,
                           stop_step_tolerance=1e-3)
    with pytest.raises(ConfigError, match="method.stop_gradient_tolerance"):
        NaturalGradientGGN(stop_window=5, stop_step_tolerance=1e-3)
    with pytest.raises(ConfigError, match="method.stop_step_tolerance"):
        NaturalGradientGGN(stop_window=5, stop_gradient_tolerance=1e-3)


@pytest.mark.second_tier
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


@pytest.mark.second_tier
def test_a_model_selection_grid_trains_each_network_as_the_posterior_trains_its_map():
    """The model-selection task's grid (Figures 5.2 / 5.3) and L-GGN's own MAP are one
    training (``LaplaceGGN.fit_grid``): the grid's network at the posterior's delta is its
    MAP, polished the same way; the other deltas are trained beside it."""
    x, y = toy_data("gaussian")
    settings = {"likelihood": "gaussian", "prior_precision": DELTA, "noise_variance": NOISE,
                "hidden": (6, 6), "lr": 1e-2, "steps": 300, "n_predictive_samples": 5,
                "polish_iterations": 50, "polish_tolerance": 1e-4}
    method = LaplaceGGN(**settings)
    diagnostics = method.fit(TrainingSet(x, y), seed=3)
    grid, seconds = LaplaceGGN(**settings).fit_grid(x, y, method.likelihood_model(),
                                                    [DELTA, 10 * DELTA], seed=3)
    assert set(seconds) == {"train_s", "polish_s"}
    torch.testing.assert_close(grid.theta[0], method.model.linearisation_point)
    assert grid.polish_iterations[0] == diagnostics["polish_iterations"]
    assert not torch.equal(grid.theta[1], grid.theta[0])


def test_the_step_size_is_checked_once_per_fit(monkeypatch):
    """The schedule is checked where the method is built and handed to the iterations as
    it is (it was checked in both places before)."""
    from bench.methods.variational import ggn_natural_gradient as module

    calls = []
    checked = module.require_step_size
    monkeypatch.setattr(module, "require_step_size",
                        lambda key, value: calls.append(key) or checked(key, value))
    x, y = toy_data("gaussian")
    method = NaturalGradientGGN(likelihood="gaussian", prior_precision=DELTA, hidden=(3,),
                                noise_variance=NOISE, step_size=0.5, iterations=3,
                                n_predictive_samples=2)
    method.fit(TrainingSet(x, y), seed=0)
    assert calls == ["method.step_size"]


class Interrupted(RuntimeError):
    """Stands for a job killed mid-fit."""


@pytest.mark.parametrize("algorithm", ["voggn", "oggn"])
def test_an_interrupted_fit_resumes_to_the_uninterrupted_result(algorithm, tmp_path,
                                                                 monkeypatch):
    """Killed after 17 updates with a checkpoint at every iteration, the fit continues from
    the checkpoint: the same state, trace, stopping-rule windows and ELBO estimates, bit for
    bit, as the run that was never interrupted."""
    from bench.methods.variational import ggn_natural_gradient as module

    x, y = toy_data("gaussian")
    data = TrainingSet(x, y, results_dir=str(tmp_path))
    settings = dict(algorithm=algorithm, likelihood="gaussian", prior_precision=DELTA,
                    noise_variance=NOISE, hidden=(6,), n_predictive_samples=5, step_size=0.5,
                    iterations=30, stop_window=4, stop_gradient_tolerance=1e-12,
                    stop_step_tolerance=1e-12, stop_elbo_every=5, stop_elbo_samples=20,
                    stop_elbo_patience=100)
    whole = NaturalGradientGGN(**settings)
    whole_diagnostics = whole.fit(TrainingSet(x, y), seed=2)

    update, calls = module.precision_and_mean_update, []

    def dies_at_the_18th(*args, **kwargs):
        calls.append(1)
        if len(calls) == 18:
            raise Interrupted
        return update(*args, **kwargs)

    monkeypatch.setattr(module, "precision_and_mean_update", dies_at_the_18th)
    monkeypatch.setattr(module, "CHECKPOINT_SECONDS", 0.0)
    interrupted = NaturalGradientGGN(**settings)
    with pytest.raises(Interrupted):
        interrupted.fit(data, seed=2)
    assert list(tmp_path.glob("states/natural_gradient_vi/*/*/seed-2.partial/checkpoint.pt"))
    monkeypatch.setattr(module, "precision_and_mean_update", update)
    resumed = NaturalGradientGGN(**settings)
    diagnostics = resumed.fit(data, seed=2)
    assert diagnostics["resumed_from_iteration"] == 17
    assert whole_diagnostics["resumed_from_iteration"] == 0
    for key in ("iterations", "stop_reason", "final_gradient_norm", "window_gradient_norm",
                "final_train_nll", "final_log_det_precision"):
        assert diagnostics[key] == whole_diagnostics[key], key
    for name in ("mean_change", "log_det_precision", "train_nll", "gradient_norm",
                 "window_gradient_norm", "window_step", "elbo_iteration", "elbo",
                 "elbo_improvement"):
        torch.testing.assert_close(torch.tensor(getattr(resumed.trace, name)),
                                   torch.tensor(getattr(whole.trace, name)), rtol=0, atol=0,
                                   equal_nan=True, msg=name)
    torch.testing.assert_close(resumed.draws, whole.draws, rtol=0, atol=0)
    assert not list(tmp_path.glob("states/natural_gradient_vi/*/*/seed-2.partial"))


def test_a_checkpoint_that_cannot_be_saved_does_not_end_the_fit(tmp_path, monkeypatch, caplog):
    from bench.harness.state_store import Checkpoints
    from bench.methods.variational import ggn_natural_gradient as module

    def disk_full(self, values):
        raise OSError(28, "No space left on device")

    x, y = toy_data("gaussian")
    settings = dict(algorithm="voggn", likelihood="gaussian", prior_precision=DELTA,
                    noise_variance=NOISE, hidden=(4,), n_predictive_samples=5, step_size=0.5,
                    iterations=6)
    whole = NaturalGradientGGN(**settings)
    whole.fit(TrainingSet(x, y), seed=1)
    monkeypatch.setattr(Checkpoints, "save", disk_full)
    monkeypatch.setattr(module, "CHECKPOINT_SECONDS", 0.0)
    saving = NaturalGradientGGN(**settings)
    saving.fit(TrainingSet(x, y, results_dir=str(tmp_path)), seed=1)
    assert "checkpoint not saved" in caplog.text
    assert saving.trace.train_nll == whole.trace.train_nll
