"""The strategy registries that replace string branches in method numerics: an unknown name
is a one-line ConfigError naming the key and the choices, and each strategy computes what the
branch it replaced computed (the old branch is written out here as the oracle)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.baselines import bayes_by_backprop as bbb
from bench.methods.baselines.checkpoint_methods import TASK_READOUTS, task_readout
from bench.methods.baselines.cyclical_sghmc import (
    STEP_SIZE_SCHEDULES,
    CyclicalSGHMC,
    code_step_size,
)
from bench.methods.baselines.hmc import VARIANCE_COPIES, HMCMethod
from bench.methods.laplace import linearised as lla
from bench.methods.laplace.classification import PRIOR_FITS, PRIOR_TUNINGS
from bench.methods.laplace.ggn_laplace import laplace_ggn_posterior
from bench.methods.laplace.ggn_methods import LaplaceGGN
from bench.methods.laplace.ggn_predictive_rules import GGN_PREDICTIVES
from bench.methods.laplace.la_predictives import (
    LAPLACE_PREDICTIVES,
    closed_form_glm,
    laplace_predictive_rule,
    sampled_glm,
    sampled_nn,
)
from bench.methods.laplace.la_protocols import LA_PROTOCOLS
from bench.methods.laplace.laplace_torch import LaplaceTorchMethod
from bench.methods.laplace.marglik import LOG_MARGINAL_LIKELIHOODS, laplace_evidence
from bench.methods.laplace.marglik_training import (
    PRIOR_SIZES,
    TENSOR_PRECISIONS,
    OnlineMarglikSettings,
    tensor_precisions,
)
from bench.methods.laplace.subnetwork import RANKING_REFERENCES, SubnetLaplaceMethod
from bench.methods.laplace.tempered import SAMPLED_PREDICTIVES, TemperedLaplace
from bench.methods.variational.ggn_natural_gradient import NaturalGradientState
from bench.methods.variational.ggn_pseudo_data import PSEUDO_DATA_RULES, pseudo_data_rule
from bench.models.glm_likelihoods import make_likelihood
from bench.models.mlp import MLPShape, init_parameters
from bench.predictive.categorical import Categorical

TINY = MLPShape((2, 3, 1), "tanh")


def one_line_error(build, key: str, choices: str) -> None:
    """``build()`` raises a ConfigError of one line naming ``key`` and ``choices``."""
    with pytest.raises(ConfigError) as raised:
        build()
    message = str(raised.value)
    assert "\n" not in message and key in message and choices in message


@pytest.mark.parametrize(("build", "key", "choices"), [
    (lambda: pseudo_data_rule("vogn"), "method.algorithm='vogn'", "voggn, lgva, oggn"),
    (lambda: LaplaceGGN(predictive="mixture"), "method.predictive='mixture'", "glm, nn, blr"),
    (lambda: lla.output_likelihood("poisson"), "likelihood='poisson'",
     "regression, classification"),
    (lambda: SubnetLaplaceMethod(covariance="kfac"), "method.covariance='kfac'",
     "full, precision_diag, block"),
    (lambda: SubnetLaplaceMethod(reference="val"), "method.reference='val'", "train, test"),
    (lambda: LaplaceTorchMethod(protocol="tuned"), "protocol.name='tuned'", "paper, corrected"),
    (lambda: laplace_evidence("all", "full", "AsdlGGN", "cholesky"),
     "method.log_det='cholesky'", "exact, eigen"),
    (lambda: HMCMethod(variance="double"), "method.variance='double'", "paper, corrected"),
    (lambda: HMCMethod(sampler="nuts"), "method.sampler='nuts'", "fast, pyro"),
    (lambda: CyclicalSGHMC(step_counter="epochs"), "method.step_counter='epochs'",
     "steps, code"),
    (lambda: bbb.kl_divergence(nn.Linear(1, 1), "batchmean"), "method.kl_reduction='batchmean'",
     "mean, sum"),
    (lambda: TemperedLaplace(likelihood="poisson"), "method.likelihood='poisson'",
     "classification, regression"),
    (lambda: laplace_predictive_rule("nn", "probit"), "method.pred_type='nn'",
     "glm/probit, glm/bridge, glm/bridge_norm, glm/mc, nn/mc"),
])
def test_an_unknown_choice_is_one_line_naming_the_key_and_the_choices(build, key, choices):
    one_line_error(build, key, choices)


def test_the_pseudo_data_rules_average_the_window_only_when_they_sample():
    assert {name: rule.averaged for name, rule in PSEUDO_DATA_RULES.items()} == {
        "voggn": True, "lgva": True, "oggn": False}


def test_lgva_rule_is_the_linearised_network_at_the_voggn_draws():
    mean = init_parameters(TINY, make_generator(0), torch.float64)
    state = NaturalGradientState.isotropic(mean, 0.3)
    x = torch.randn(5, 2, generator=make_generator(1), dtype=torch.float64)
    f_hat, jacobians = PSEUDO_DATA_RULES["lgva"](TINY, state, x, 3, make_generator(2))
    thetas = state.posterior.sample(3, make_generator(2))
    jacobian = TINY.jacobian(mean, x)
    torch.testing.assert_close(f_hat, TINY.forward_1d(mean, x) + (thetas - mean) @ jacobian.T)
    torch.testing.assert_close(jacobians, jacobian.expand(3, -1, -1))


def ggn_model():
    x = torch.randn(8, 2, generator=make_generator(3), dtype=torch.float64)
    theta = init_parameters(TINY, make_generator(4), torch.float64)
    model = laplace_ggn_posterior(TINY, theta, x, make_likelihood("gaussian", 0.5), 1.0)
    return model, model.posterior.sample(40, make_generator(5)), x


def test_nn_regression_predictive_is_the_draws_moments_plus_the_noise():
    model, draws, x = ggn_model()
    predictive = GGN_PREDICTIVES["nn"].regression(model, draws, x, 0.5)
    values = model.network_outputs(draws, x)
    torch.testing.assert_close(predictive.mean, values.mean(0))
    torch.testing.assert_close(predictive.variance, values.var(0) + 0.5)


@pytest.mark.parametrize("name", ["glm", "blr"])
def test_glm_and_blr_regression_predictives_are_the_closed_form_plus_the_noise(name):
    model, draws, x = ggn_model()
    predictive = GGN_PREDICTIVES[name].regression(model, draws, x, 0.5)
    mean, variance = model.glm_function_moments(x)
    torch.testing.assert_close(predictive.mean, mean)
    torch.testing.assert_close(predictive.variance, variance + 0.5)


def test_blr_is_refused_for_a_bernoulli_likelihood():
    with pytest.raises(ConfigError, match="method.predictive='blr'"):
        LaplaceGGN(predictive="blr", likelihood="bernoulli")


def test_output_likelihoods_give_the_paper_curvatures_and_predictives():
    f = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64)
    torch.testing.assert_close(lla.output_curvature(f, "regression", 0.25), torch.full_like(f, 4.0))
    s = torch.sigmoid(f)
    torch.testing.assert_close(lla.output_curvature(f, "classification"), s * (1 - s))
    x = torch.randn(4, 2, generator=make_generator(6), dtype=torch.float64)
    theta = init_parameters(TINY, make_generator(7), torch.float64)
    for likelihood, noise in (("regression", 0.3), ("classification", 1.0)):
        fit = lla.fit_linearised_laplace(TINY, theta, x, likelihood, noise)
        function = fit.function_predictive(x)
        predictive = fit.likelihood_predictive(x)
        extra = noise if likelihood == "regression" else 0.0
        torch.testing.assert_close(predictive.mean, function.mean)
        torch.testing.assert_close(predictive.variance, function.variance + extra)


def test_surrogate_covariances_are_the_named_functions():
    x = torch.randn(6, 2, generator=make_generator(8), dtype=torch.float64)
    theta = init_parameters(TINY, make_generator(9), torch.float64)
    omega = lla.fit_linearised_laplace(TINY, theta, x, "regression").omega
    expected = {"full": lla.full_covariance(omega),
                "precision_diag": lla.precision_diagonal_covariance(omega),
                "block": lla.layer_block_covariance(omega, TINY)}
    for name, build in lla.SURROGATE_COVARIANCES.items():
        torch.testing.assert_close(build(omega, TINY).dense(), expected[name].dense())
    assert SubnetLaplaceMethod().is_full_lla
    assert not SubnetLaplaceMethod(covariance="block").is_full_lla


def test_ranking_references_rank_at_fit_or_at_prediction():
    calls = []

    def rank(inputs):
        calls.append(inputs)
        return inputs.argsort()

    x_fit, x_test = torch.tensor([3.0, 1.0, 2.0]), torch.tensor([0.5, 0.1])
    train, test = RANKING_REFERENCES["train"], RANKING_REFERENCES["test"]
    fitted = train.fit_ranking(rank, x_fit)
    assert torch.equal(train.ranking(fitted, rank, x_test), torch.tensor([1, 2, 0]))
    assert test.fit_ranking(rank, x_fit) is None
    assert torch.equal(test.ranking(None, rank, x_test), torch.tensor([1, 0]))
    assert len(calls) == 2


def test_la_protocols_start_and_keep_updates_as_their_protocols_say():
    base = type("Base", (), {"noise_variance": 0.25, "prior_precision": 3.0})()
    paper, corrected = LA_PROTOCOLS["paper"], LA_PROTOCOLS["corrected"]
    assert paper.start(base) == (1.0, 1.0)
    assert corrected.start(base) == (0.5, 3.0)
    assert (paper.updates_kept(100), corrected.updates_kept(100)) == (99, 100)
    log_prior, log_sigma, trained = paper.log_hyperparameters(1.0, 1.0, torch.float64)
    assert log_prior.dtype == torch.float32 and float(log_prior.detach()) == 1.0
    assert trained == [log_prior] and not log_sigma.requires_grad
    log_prior, log_sigma, trained = corrected.log_hyperparameters(0.5, 3.0, torch.float64)
    assert float(log_prior.detach()) == pytest.approx(math.log(3.0))
    assert float(log_sigma.detach()) == pytest.approx(math.log(0.5)) and len(trained) == 2


def test_log_marginal_likelihoods_by_log_det():
    la = type("La", (), {"log_marginal_likelihood": staticmethod(lambda p: p * 2)})()
    assert float(LOG_MARGINAL_LIKELIHOODS["exact"](la)(torch.tensor(3.0))) == 6.0
    assert set(LOG_MARGINAL_LIKELIHOODS) == {"exact", "eigen"}


def test_hmc_variance_copies():
    assert VARIANCE_COPIES == {"paper": 2.0, "corrected": 1.0}
    assert HMCMethod(variance="corrected").variance_copies == 1.0


def test_step_size_schedules_of_the_step_counter():
    sampler = CyclicalSGHMC(step_counter="code", cycles=2, epochs_per_cycle=3, lr=0.2)
    assert STEP_SIZE_SCHEDULES["steps"](sampler, 1000, 4) is None
    schedule = sampler._step_size(1000, 4)
    for step in (0, 5, 17):
        assert schedule(step) == code_step_size(step, steps_per_epoch=4, n_data=1000, epochs=6,
                                                cycles=2, lr=0.2)


def test_kl_divergences_are_bayesian_torchs_mean_and_the_sum():
    layer = bbb.to_flipout(nn.Sequential(nn.Linear(3, 2)), 1.0, 0.0, -3.0)
    flipout = bbb.flipout_layers(layer)[0]
    assert float(bbb.kl_divergence(layer, "mean")) == pytest.approx(float(flipout.kl_loss()))
    assert float(bbb.KL_DIVERGENCES["sum"](layer)) == pytest.approx(
        float(bbb.summed_kl(layer)))
    assert float(bbb.summed_kl(layer)) > float(bbb.layer_mean_kl(layer))


def test_checkpoint_task_readouts():
    logits = torch.tensor([[0.0, 1.0], [2.0, -1.0]])
    single = TASK_READOUTS["classification"].single(logits, None)
    torch.testing.assert_close(single.probs, torch.softmax(logits.double(), dim=-1))
    outputs = torch.tensor([[[1.0], [2.0]], [[3.0], [6.0]]], dtype=torch.float64)
    gaussian = TASK_READOUTS["regression"].ensemble(outputs, 0.5)
    torch.testing.assert_close(gaussian.mean, torch.tensor([2.0, 4.0], dtype=torch.float64))
    torch.testing.assert_close(gaussian.variance,
                               torch.tensor([2.25, 8.25], dtype=torch.float64))
    assert TASK_READOUTS["classification"].fit_noise(None, "ERM", {}, "cpu") == {}
    job = type("Job", (), {"data": type("Data", (), {"task": "ranking"})()})()
    one_line_error(lambda: task_readout(job), "dataset.task='ranking'",
                   "classification, regression")


def test_sampled_predictives_cover_every_likelihood():
    assert set(SAMPLED_PREDICTIVES) == {"classification", "regression"}
    model = nn.Linear(2, 1).double()
    thetas = torch.randn(5, 3, generator=make_generator(10), dtype=torch.float64)
    x = torch.randn(4, 2, generator=make_generator(11), dtype=torch.float64)
    gaussian = SAMPLED_PREDICTIVES["regression"](model, thetas, x, 2, 0.5)
    values = thetas[:, :2] @ x.T + thetas[:, 2:]
    torch.testing.assert_close(gaussian.mean, values.mean(0))
    torch.testing.assert_close(gaussian.variance, values.var(0) + 0.25)
    assert isinstance(SAMPLED_PREDICTIVES["classification"](
        nn.Linear(2, 3).double(), torch.randn(5, 9, dtype=torch.float64), x, 2, 1.0),
        Categorical)


def test_laplace_predictive_rules_by_pred_type_and_link():
    assert laplace_predictive_rule("glm", "probit") is closed_form_glm
    assert laplace_predictive_rule("glm", "bridge_norm") is closed_form_glm
    assert laplace_predictive_rule("glm", "mc") is sampled_glm
    assert laplace_predictive_rule("nn", "mc") is sampled_nn
    assert len(LAPLACE_PREDICTIVES) == 5


def test_prior_fits_cover_every_prior_tuning():
    assert tuple(PRIOR_FITS) == PRIOR_TUNINGS


def test_online_marglik_prior_sizes_and_tensor_precisions():
    network = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    assert PRIOR_SIZES["scalar"](network) == 1 and PRIOR_SIZES["layerwise"](network) == 4
    prior = torch.tensor([2.0])
    everywhere = tensor_precisions(prior, network, OnlineMarglikSettings(subset_of_weights="all"),
                                   "1")
    torch.testing.assert_close(everywhere, torch.full((4,), 2.0))
    settings = OnlineMarglikSettings(subset_of_weights="last_layer", prior_precision=5.0)
    torch.testing.assert_close(TENSOR_PRECISIONS["last_layer"](prior, network, settings, "1"),
                               torch.tensor([5.0, 5.0, 2.0, 2.0]))
