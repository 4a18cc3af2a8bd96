"""The model-selection grids of GGN thesis Figures 5.2 / 5.3: the notes' grids hold the
reported optima; bad grids are one-line errors naming the key."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from bench.datasets.snelson import SnelsonGapData
from bench.harness.errors import ConfigError
from bench.harness.finished_jobs import apply_scale_overrides
from bench.harness.rng import make_generator
from bench.methods.laplace.ggn_laplace import laplace_ggn_posterior
from bench.models.glm_likelihoods import GaussianLikelihood
from bench.models.mlp import MLPShape, init_parameters
from bench.tasks.ggn_model_selection import (
    evaluate_network,
    glm_probability,
    log_grid,
    noise_variance_of_job,
)
from tests.helpers import compose_config


def test_the_notes_grids_contain_the_reported_optima():
    cfg = compose_config(["experiment=ggn_thesis/figure-5.2"])
    deltas = log_grid(cfg.grid.prior_precision, "grid.prior_precision")
    noises = log_grid(cfg.grid.noise_variance, "grid.noise_variance")
    assert len(deltas) == 31 and len(noises) == 21
    assert deltas[0] == pytest.approx(1e-4) and deltas[-1] == pytest.approx(100)
    assert round(deltas[19], 2) == 0.63 and noises[10] == pytest.approx(0.1)
    moons = compose_config(["experiment=ggn_thesis/figure-5.3"])
    classification = log_grid(moons.grid.prior_precision, "grid.prior_precision")
    assert len(classification) == 19 and round(classification[5], 2) == 0.13
    assert moons.method.prior_precision != classification[5]  # the grid, not the node, sets it
    fig_5_5 = compose_config(["experiment=ggn_thesis/figure-5.5"])
    assert fig_5_5.method.prior_precision == pytest.approx(classification[5])
    fig_5_4 = compose_config(["experiment=ggn_thesis/figure-5.4"])
    assert fig_5_4.method.prior_precision == pytest.approx(deltas[19])


@pytest.mark.parametrize("scale", ["smoke", "cpu", "paper"])
def test_figure_5_3_polishes_every_network_and_averages_seeds(scale):
    overrides = ["experiment=ggn_thesis/figure-5.3", f"scale={scale}"]
    cfg = apply_scale_overrides(compose_config(overrides), overrides)
    assert cfg.method.polish_iterations > 0 and cfg.method.polish_tolerance == 1e-6
    assert len(cfg.seeds[scale]) >= (1 if scale == "smoke" else 3)


@pytest.mark.parametrize(("node", "message"), [
    ({"low": 0.0, "high": 1.0, "points": 3}, r"grid.prior_precision.low=0.0 .*positive"),
    ({"low": 1e-2, "high": -1.0, "points": 3}, r"grid.prior_precision.high=-1.0 .*positive"),
    ({"low": 1e-2, "high": 1.0, "points": 0}, r"grid.prior_precision.points=0 "),
    ({"low": 1.0, "high": 0.1, "points": 3}, r"grid.prior_precision.low=1.0 must not exceed"),
])
def test_a_bad_grid_names_the_key(node, message):
    with pytest.raises(ConfigError, match=message):
        log_grid(OmegaConf.create(node), "grid.prior_precision")


def test_noise_variance_grid_and_index_are_checked():
    grid = OmegaConf.create({"noise_variance": {"low": 1e-3, "high": 10.0, "points": 21},
                             "noise_variance_index": 21})
    with pytest.raises(ConfigError, match=r"grid.noise_variance_index=21 .*0..20"):
        noise_variance_of_job(grid, "gaussian")
    grid.noise_variance_index = 10
    assert noise_variance_of_job(grid, "gaussian") == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="grid.noise_variance must be null"):
        noise_variance_of_job(grid, "bernoulli")
    grid.noise_variance = {"low": -1e-3, "high": 10.0, "points": 21}
    with pytest.raises(ConfigError, match=r"grid.noise_variance.low=-0.001"):
        noise_variance_of_job(grid, "gaussian")
    assert noise_variance_of_job(OmegaConf.create({"noise_variance": None}), "bernoulli") is None


def test_one_grid_point_evaluates_as_the_laplace_ggn_posterior_does():
    data = SnelsonGapData(n_train=30, n_test=40).splits()
    network = MLPShape((1, 8, 8, 1), "tanh")
    theta = init_parameters(network, make_generator(0), torch.float64)
    likelihood = GaussianLikelihood(0.1)
    x_plot = torch.linspace(0, 6, 9, dtype=torch.float64).unsqueeze(1)
    values = evaluate_network(network, theta, likelihood, 0.5, data, x_plot, 10,
                              make_generator(1))
    model = laplace_ggn_posterior(network, theta, data.x_train, likelihood, 0.5)
    mean, variance = model.glm_function_moments(x_plot)
    torch.testing.assert_close(values["glm_mean"], mean)
    torch.testing.assert_close(values["glm_sd"], variance.sqrt(), rtol=1e-8, atol=1e-12)
    f_test = network.forward_1d(theta, data.x_test)
    assert values["test_ll"] == pytest.approx(float(likelihood.log_prob(f_test,
                                                                        data.y_test).mean()))
    assert values["blr_mean_shift"] > 0 and math.isfinite(values["log_evidence"])


def test_glm_probability_averages_the_sigmoid_over_draws():
    mean = torch.tensor([0.0, 3.0], dtype=torch.float64)
    variance = torch.tensor([4.0, 0.0], dtype=torch.float64)
    p = glm_probability(mean, variance, 20000, make_generator(0))
    assert float(p[0]) == pytest.approx(0.5, abs=0.01)
    assert float(p[1]) == pytest.approx(float(torch.sigmoid(torch.tensor(3.0))))
