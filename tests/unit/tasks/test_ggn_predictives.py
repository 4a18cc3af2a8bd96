"""GGN thesis Figures 5.4 / 5.5 task cells: Figure 5.5b's model-sd ratio (a cell when it is a
number, a failed cell with its reason when the near-data sd underflows: the overflowed 8.2e+292
of an earlier report), and the ELBO of a row's q (at the exact Bayesian linear regression
posterior: the log evidence)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from bench.datasets.train_test import TrainTest
from bench.harness.errors import ConfigError
from bench.harness.result import TaskResult
from bench.jobs.toy_runner import ToyJob
from bench.methods.laplace.ggn_laplace import GaussianPosterior, GGNPredictive
from bench.models.glm_likelihoods import GaussianLikelihood
from bench.reporting.figures.ggn_toys import log10_map, robust_levels
from bench.tasks.ggn_predictives import add_elbo, add_model_sd_ratio, bernoulli_scores
from tests.unit.methods.test_ggn_known_answers import (
    BLR_DELTA,
    BLR_NOISE,
    LINEAR,
    exact_blr_posterior,
    regression_data,
)
from tests.unit.metrics.test_elbo import FIVE_SIGMA, log_evidence


def scalar(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float64)


def test_a_finite_ratio_is_a_cell():
    result = TaskResult()
    add_model_sd_ratio(result, "L-GGN", scalar(3.0), scalar(1.5), scalar(2.0))
    assert [(c.row, c.column, c.value) for c in result.cells] == [
        ("L-GGN", "model_sd_far_over_near", 2.0)]
    assert result.failed_cells == []


@pytest.mark.parametrize("near", [0.0, 1e-300])
def test_an_underflowed_near_sd_fails_the_cell_with_its_reason(near):
    result = TaskResult()
    add_model_sd_ratio(result, "LGVA", scalar(8e-8), scalar(near), scalar(900.0))
    assert result.cells == []
    (failed,) = result.failed_cells
    assert (failed["row"], failed["column"]) == ("LGVA", "model_sd_far_over_near")
    assert "saturates" in failed["reason"] and "900" in failed["reason"]
    assert result.non_finite() == []  # the record stays ok; only this cell failed


def test_robust_levels_ignore_a_thin_line_of_extreme_values():
    values = [0.1 + 0.8 * k / 999 for k in range(1000)]
    values[:5] = [1e6] * 5  # a ridge of five points
    levels = robust_levels(values, n_levels=4)
    assert len(levels) == 5 and levels[-1] < 1.0 and levels[0] >= 0.1
    assert levels == sorted(levels)
    assert robust_levels([None, float("nan")]) == [0.0, 1.0]
    flat = robust_levels([2.0] * 10)
    assert flat[0] == 2.0 and flat[-1] > 2.0


def test_sd_maps_are_drawn_in_log10_with_gaps_where_not_positive():
    mapped = log10_map([100.0, 1e-8, 0.0, None])
    assert mapped[:2] == [2.0, -8.0]
    assert all(v != v for v in mapped[2:])  # NaN: left blank on the map


def test_bernoulli_nll_is_exact_for_saturated_logits():
    """A confidently wrong predictive: log p is about -800 per point, not a clamp at
    -log(tiny) = 708; a moderate one matches the direct formula."""
    y = torch.tensor([1.0, 0.0], dtype=torch.float64)
    saturated = torch.tensor([[-800.0, 800.0], [-900.0, 900.0]], dtype=torch.float64)
    scores = bernoulli_scores(saturated, y)
    expected = -(torch.logsumexp(torch.tensor([-800.0, -900.0], dtype=torch.float64), 0)
                 - math.log(2))
    assert scores["test_nll"] == pytest.approx(float(expected))  # both points alike
    assert scores["accuracy"] == 0.0 and scores["decisiveness"] == 1.0
    moderate = torch.tensor([[0.5, -1.0], [1.5, 0.2]], dtype=torch.float64)
    p = torch.sigmoid(moderate).mean(0)
    direct = -(torch.log(p[0]) + torch.log(1 - p[1])) / 2
    assert bernoulli_scores(moderate, y)["test_nll"] == pytest.approx(float(direct))


def blr_job() -> tuple[SimpleNamespace, ToyJob]:
    """A method whose q is the exact BLR posterior over the linear 'network', and its job."""
    x, y = regression_data()
    mean, precision = exact_blr_posterior()
    model = GGNPredictive(LINEAR, GaussianPosterior.from_precision(mean, precision), mean,
                          GaussianLikelihood(BLR_NOISE))
    method = SimpleNamespace(model=model, prior_precision=BLR_DELTA)
    return method, ToyJob(TrainTest("blr", x, y, x, y), seed=0)


def test_the_elbo_cell_at_the_exact_blr_posterior_is_the_log_evidence():
    method, job = blr_job()
    add_elbo(OmegaConf.create({"task": {"elbo_samples": 4000}}), method, job, "exact")
    (cell,) = job.result.cells
    assert (cell.row, cell.column) == ("exact", "elbo")
    x, y = job.data.x_train, job.data.y_train
    standard_error = job.result.fitted["elbo_standard_error"]
    assert abs(cell.value - log_evidence(x, y)) < FIVE_SIGMA * standard_error
    assert job.result.fitted["elbo_mc_samples"] == 4000


@pytest.mark.parametrize("samples", [1, 0, 2.5, True])
def test_too_few_elbo_draws_are_a_one_line_error_naming_the_key(samples):
    method, job = blr_job()
    with pytest.raises(ConfigError, match="task.elbo_samples"):
        add_elbo(OmegaConf.create({"task": {"elbo_samples": samples}}), method, job, "exact")
