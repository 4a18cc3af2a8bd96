"""The reference VI as a GGN posterior method (the oracle row of GGN thesis Figures 5.4 / 5.5)
on Bayesian linear regression, where its full-rank optimum is the exact posterior and the ELBO
there is the log evidence: the kept q, its GLM predictive and the ELBO that the predictive task
records for it are checked against those closed forms."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import MultivariateNormal, kl_divergence

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.methods.variational.reference_gaussian_vi import ReferenceGaussianVI
from bench.metrics.elbo import fitted_posterior_elbo
from tests.unit.methods.test_ggn_known_answers import (
    BLR_DELTA,
    BLR_NOISE,
    design,
    exact_blr_posterior,
    regression_data,
)
from tests.unit.methods.test_reference_vi import GAP_SHARE_OF_SE
from tests.unit.metrics.test_elbo import FIVE_SIGMA, log_evidence

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def blr_method(**changes) -> ReferenceGaussianVI:
    """The linear 'network' (no hidden layer) of the known-answer tests, full-rank guide, many
    vectorised particles (the settings of tests/unit/methods/test_reference_vi.py)."""
    settings = {"guides": ("full_rank",), "steps": 300, "num_particles": 1024, "lr": 0.1,
                "final_lr": 0.001, "init_scale": 0.1, "map_steps": 0, "elbo_samples": 4000}
    return ReferenceGaussianVI(likelihood="gaussian", prior_precision=BLR_DELTA,
                               noise_variance=BLR_NOISE, hidden=(), n_predictive_samples=10,
                               reference_vi={**settings, **changes})


@pytest.mark.second_tier
def test_the_kept_q_is_the_blr_posterior_and_its_recorded_elbo_the_log_evidence(tmp_path):
    x, y = regression_data()
    method = blr_method()
    diagnostics = method.fit(TrainingSet(x, y, results_dir=str(tmp_path)), seed=0)
    (only,) = diagnostics["reference_fits"]
    assert (diagnostics["best_start"], diagnostics["best_guide"]) == ("init", "full_rank")
    q = method.model.posterior
    mean, precision = exact_blr_posterior()
    kl = float(kl_divergence(MultivariateNormal(q.mean, q.covariance()),
                             MultivariateNormal(mean, precision_matrix=precision)))
    assert 0 <= kl < GAP_SHARE_OF_SE * only["elbo_standard_error"]
    recorded = fitted_posterior_elbo(method.model, BLR_DELTA, x, y, mc_samples=4000, seed=3)
    assert abs(recorded.elbo - log_evidence(x, y)) < FIVE_SIGMA * recorded.standard_error
    features = design(x[:5])
    exact = (features @ torch.linalg.solve(precision, features.T)).diagonal()
    _, variance = method.model.glm_function_moments(x[:5])
    assert torch.allclose(variance, exact, rtol=1e-2)


def test_bad_settings_name_their_key():
    with pytest.raises(ConfigError, match="reference_vi.guides"):
        blr_method(guides=("banded",))
    with pytest.raises(ConfigError, match="reference_vi.steps"):
        blr_method(steps=0)
    with pytest.raises(ConfigError,
                       match=r"reference_vi.particles is not a setting of reference_vi; "
                             r"choose from: .*num_particles"):
        blr_method(particles=4)


def test_the_fit_is_stored_once_and_loaded_by_the_next_job_of_the_same_data(tmp_path):
    """The second protocol's job loads the first one's fit (the same q); data of other content
    under the same name is another recipe and is fitted anew."""
    x, y = regression_data()
    quick = {"steps": 5, "num_particles": 4, "elbo_samples": 10}
    first = blr_method(**quick)
    made = first.fit(TrainingSet(x, y, results_dir=str(tmp_path)), seed=1)
    again = blr_method(**quick)
    loaded = again.fit(TrainingSet(x, y, results_dir=str(tmp_path)), seed=1)
    assert (made["state_reused"], loaded["state_reused"]) == (False, True)
    assert loaded["recipe_hash"] == made["recipe_hash"]
    assert torch.equal(again.model.posterior.mean, first.model.posterior.mean)
    assert torch.equal(again.model.posterior.factor, first.model.posterior.factor)
    assert loaded["reference_fits"] == made["reference_fits"]
    other = blr_method(**quick).fit(TrainingSet(x, y + 0.1, results_dir=str(tmp_path)), seed=1)
    assert (other["state_reused"], other["recipe_hash"] != made["recipe_hash"]) == (False, True)
