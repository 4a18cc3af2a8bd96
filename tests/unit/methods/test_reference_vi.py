"""The reference Gaussian VI (:mod:`bench.methods.variational.reference_vi`, pyro's SVI) against
known optima, on the linear 'network' and data of the known-answer tests:

* Bayesian linear regression: the posterior is Gaussian, so the full-rank guide's optimum is
  the posterior and its ELBO the log evidence; the mean-field optimum is known too (the
  posterior mean, variances ``1 / Lambda_ii``). For any q, ``log Z - ELBO(q) =
  KL(q || posterior)``, which is computed exactly here, so the fit's gap to its optimum is
  known without Monte Carlo error;
* Bayesian logistic regression: the gap to the Gaussian-VI optimum that the known-answer test
  computes by Gauss-Hermite quadrature and Newton's method, both ELBOs by that quadrature.

Tolerance on the gap (derived from the oracle's use): the reference VI ranks q's by the ELBO
estimate of :func:`bench.metrics.elbo.gaussian_elbo`, so its own shortfall from the optimum
must be small against that estimate's Monte Carlo standard error at the scoring sample size:
a tenth of it (:data:`GAP_SHARE_OF_SE`). Then the oracle's optimisation error is invisible
next to the noise every ELBO comparison already carries.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pyro
import pytest
import torch
from torch.distributions import MultivariateNormal, kl_divergence

from bench.harness.errors import ConfigError
from bench.methods.laplace.ggn_methods import LaplaceGGN
from bench.methods.variational.reference_vi import (
    ReferenceVISettings,
    isolated_pyro,
    reference_vi,
    reference_vi_for,
)
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood
from tests.unit.methods.test_ggn_known_answers import (
    BLR_DELTA,
    BLR_NOISE,
    LINEAR,
    LOGISTIC_DELTA,
    LOWER,
    P,
    classification_data,
    exact_blr_posterior,
    gaussian_vi_optimum,
    negative_elbo,
    newton_iterates,
    regression_data,
)
from tests.unit.methods.test_ggn_laplace import toy_data
from tests.unit.metrics.test_elbo import FIVE_SIGMA, log_evidence

GAP_SHARE_OF_SE = 0.1
# Few steps with many vectorised particles: pyro's per-step overhead dominates a 3-parameter
# model, the particles are nearly free.
KNOWN_ANSWER = ReferenceVISettings(steps=300, num_particles=1024, lr=0.1, final_lr=0.001,
                                   init_scale=0.1, map_steps=0, elbo_samples=4000)
ZERO = torch.zeros(P, dtype=torch.float64)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def kl_to_posterior(q) -> float:
    """``KL(q || exact BLR posterior)`` in closed form."""
    mean, precision = exact_blr_posterior()
    return float(kl_divergence(MultivariateNormal(q.mean, q.covariance()),
                               MultivariateNormal(mean, precision_matrix=precision)))


@pytest.mark.parametrize("guide", ["full_rank", "diagonal"])
@pytest.mark.second_tier
def test_reference_vi_reaches_the_blr_optimum_of_its_guide(guide):
    """Full rank: ``KL(q || posterior)``, the gap to the log evidence. Mean field: the same
    minus the mean-field optimum's ``1/2 (sum log Lambda_ii - log det Lambda)``."""
    x, y = regression_data()
    mean, precision = exact_blr_posterior()
    settings = replace(KNOWN_ANSWER, guides=(guide,))
    fit = reference_vi(LINEAR, x, y, GaussianLikelihood(BLR_NOISE), BLR_DELTA, ZERO, seed=0,
                       settings=settings).best
    assert (fit.start, fit.guide) == ("init", guide)
    optimum_gap = 0.0 if guide == "full_rank" else 0.5 * float(
        precision.diagonal().log().sum() - torch.linalg.slogdet(precision).logabsdet)
    gap = kl_to_posterior(fit.q) - optimum_gap
    assert -1e-12 < gap < GAP_SHARE_OF_SE * fit.elbo.standard_error
    optimum = log_evidence(x, y) - optimum_gap
    assert abs(fit.elbo.elbo - optimum) < FIVE_SIGMA * fit.elbo.standard_error
    assert abs(fit.final_loss + fit.elbo.elbo) < FIVE_SIGMA * fit.elbo.standard_error


def quadrature_elbo(mean: torch.Tensor, covariance: torch.Tensor) -> float:
    """The known-answer test's Gauss-Hermite ELBO of ``N(mean, covariance)``."""
    factor = torch.linalg.cholesky(covariance)
    with torch.no_grad():
        return -float(negative_elbo(torch.cat([mean, factor[LOWER[0], LOWER[1]]])))


@pytest.mark.second_tier
def test_reference_vi_reaches_the_quadrature_optimum_of_logistic_regression():
    x, y = classification_data()
    mean, precision = gaussian_vi_optimum()
    optimum = quadrature_elbo(mean, torch.linalg.inv(precision))
    settings = replace(KNOWN_ANSWER, guides=("full_rank",))
    fit = reference_vi(LINEAR, x, y, BernoulliLikelihood(), LOGISTIC_DELTA, ZERO, seed=1,
                       settings=settings).best
    gap = optimum - quadrature_elbo(fit.q.mean, fit.q.covariance())
    assert -1e-9 < gap < GAP_SHARE_OF_SE * fit.elbo.standard_error
    assert abs(fit.elbo.elbo - optimum) < FIVE_SIGMA * fit.elbo.standard_error


@pytest.mark.second_tier
def test_map_start_is_the_map_and_every_start_is_fitted_and_ranked():
    """The ``map`` start (SVI with a delta guide, deterministic) is Newton's MAP; the fits
    cover every start and guide, best ELBO first."""
    x, y = classification_data()
    settings = ReferenceVISettings(guides=("diagonal", "low_rank"), steps=30, num_particles=16,
                                   map_steps=400, map_lr=0.1, final_lr=0.001,
                                   elbo_samples=200)
    passed = torch.full((P,), 0.5, dtype=torch.float64)
    result = reference_vi(LINEAR, x, y, BernoulliLikelihood(), LOGISTIC_DELTA, ZERO, seed=2,
                          settings=settings, means={"passed": passed})
    newton = newton_iterates(x, y, ZERO, 10)[-1]
    assert float((result.map_mean - newton).abs().max()) < 1e-4
    assert sorted((fit.start, fit.guide) for fit in result.fits) == sorted(
        (start, guide) for start in ("init", "map", "passed")
        for guide in ("diagonal", "low_rank"))
    elbos = [fit.elbo.elbo for fit in result.fits]
    assert elbos == sorted(elbos, reverse=True)


def test_a_fit_is_reproducible_and_leaves_every_global_state_as_it_was():
    x, y = regression_data()
    settings = ReferenceVISettings(guides=("low_rank",), steps=20, num_particles=8,
                                   map_steps=5, elbo_samples=50)
    before = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    with pyro.get_param_store().scope():
        pyro.param("caller_parameter", torch.ones(2))
        runs = [reference_vi(LINEAR, x, y, GaussianLikelihood(BLR_NOISE), BLR_DELTA, ZERO,
                             seed=9, settings=settings) for _ in range(2)]
        assert list(pyro.get_param_store().keys()) == ["caller_parameter"]
    assert torch.equal(torch.get_rng_state(), before[0])
    assert random.getstate() == before[1]
    assert np.array_equal(np.random.get_state()[1], before[2])
    first, second = (run.best for run in runs)
    assert torch.equal(first.q.mean, second.q.mean)
    assert torch.equal(first.q.factor, second.q.factor)
    assert first.elbo == second.elbo


def test_isolated_pyro_restores_the_states_when_the_fit_fails():
    before = torch.get_rng_state()
    with pytest.raises(RuntimeError, match="inside"), isolated_pyro(3):
        torch.randn(4)
        raise RuntimeError("inside")
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize("change, message", [
    ({"guides": ("full",)}, "reference_vi.guides='full' is not valid; choose one of: "
                            "diagonal, low_rank, full_rank"),
    ({"guides": ()}, "reference_vi.guides is empty"),
    ({"steps": 0}, "reference_vi.steps=0 is not valid"),
    ({"final_lr": 0.1, "lr": 0.01}, "reference_vi.final_lr=0.1 is not valid"),
    ({"map_steps": -1}, "reference_vi.map_steps=-1 is not valid"),
    ({"rank": 0}, "reference_vi.rank=0 is not valid"),
])
def test_bad_settings_are_one_line_config_errors(change, message):
    with pytest.raises(ConfigError, match=message):
        ReferenceVISettings(**change)


def test_bad_starts_are_one_line_config_errors():
    x, y = regression_data()
    likelihood = GaussianLikelihood(BLR_NOISE)
    with pytest.raises(ConfigError, match="start 'wide' has shape"):
        reference_vi(LINEAR, x, y, likelihood, BLR_DELTA, ZERO, seed=0,
                     means={"wide": torch.zeros(5, dtype=torch.float64)})
    with pytest.raises(ConfigError, match="reserved"):
        reference_vi(LINEAR, x, y, likelihood, BLR_DELTA, ZERO, seed=0, means={"map": ZERO})


def test_reference_vi_for_a_method_takes_its_network_model_and_initialisation():
    """The oracle beside a GGN posterior method: that method's network, likelihood, delta and
    the seed's shared initialisation (a 1-3-1 tanh net, Bernoulli; a few steps)."""
    x, y = toy_data("bernoulli")
    method = LaplaceGGN(likelihood="bernoulli", hidden=(3,), prior_precision=2.0)
    settings = ReferenceVISettings(guides=("diagonal",), steps=3, num_particles=4, map_steps=0,
                                   lr=1e-9, final_lr=1e-9, init_scale=1e-6, elbo_samples=20)
    fit = reference_vi_for(method, x, y, 4, settings=settings).best
    network = method.network(1)
    assert fit.q.n_params == network.n_params == 10
    assert float((fit.q.mean - method.initial_mean(network, 4)).abs().max()) < 1e-6
