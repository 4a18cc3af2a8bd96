"""NN sampling vs GLM sampling for four Gaussian posteriors (GGN thesis Section 5.2, Figures
5.4 and 5.5).

One job = one posterior (``posterior``: a variant of the method node, VOGGN, LGVA, OGGN or
L-GGN) fitted with the job seed (all four start from the same initialisation), then its
``n_predictive_samples`` parameter draws pushed through the network (NN sampling, eq. 3.14)
and through the network linearised at the posterior's linearisation point (GLM sampling, eq.
3.15; the final mean for VOGGN / LGVA / OGGN, ``theta*`` for L-GGN). The same draws serve
both predictives.

Cells (row = posterior):

* regression: ``<nn|glm>/test_nll`` (the predictive of y: NN, the mixture
  ``1/S sum_s N(y | f_s, sigma^2)``; GLM, the closed form ``N(mean, J Sigma J^T + sigma^2)``),
  ``<nn|glm>/test_rmse`` (of the predictive mean), ``<nn|glm>/mean_sd`` (the function's
  predictive sd averaged over the figure's inputs, sigma^2 not added: the figure's band);
* classification: ``<nn|glm>/test_nll``, ``<nn|glm>/accuracy``, ``<nn|glm>/decisiveness``
  (the mean of ``|2 p - 1|`` over the test inputs: 0 for uniform predictions) and
  ``model_sd_far_over_near`` (Figure 5.5b: the BLR model sd ``sqrt(Lambda J Sigma J^T Lambda)``
  averaged over figure inputs farther than ``far_distance`` from every training input, over
  its average within ``near_distance`` of one).

Arrays: the figure's inputs, per predictive the mean and sd (regression) or the probability
map (classification), three joint function samples per predictive (regression), the BLR model
and noise sd maps (classification), and the fitting trace.
"""

from __future__ import annotations

import math

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from bench.datasets.snelson import SnelsonGapData
from bench.datasets.two_moons import TwoMoonsData
from bench.harness.errors import require_choice, require_positive
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.methods.base import instantiate_method, method_variants
from bench.methods.laplace.ggn_methods import GGNPosteriorMethod
from bench.models.glm_likelihoods import BernoulliLikelihood

PREDICTIVES = ("nn", "glm")
JOINT_SAMPLES = 3


def mixture_nll(draws: Tensor, y: Tensor, noise_variance: float) -> float:
    """Mean over points of ``-log 1/S sum_s N(y | f_s, sigma^2)`` for draws ``[S, n]``."""
    log_densities = (-0.5 * math.log(2 * math.pi * noise_variance)
                     - (y - draws) ** 2 / (2 * noise_variance))
    return float(-(torch.logsumexp(log_densities, 0) - math.log(draws.shape[0])).mean())


def gaussian_nll(mean: Tensor, variance: Tensor, y: Tensor) -> float:
    """Mean Gaussian negative log likelihood."""
    return float((0.5 * torch.log(2 * math.pi * variance)
                  + (y - mean) ** 2 / (2 * variance)).mean())


def bernoulli_scores(probability: Tensor, y: Tensor) -> dict[str, float]:
    """Test NLL, accuracy and decisiveness ``mean |2 p - 1|`` of probabilities of class 1."""
    tiny = torch.finfo(probability.dtype).tiny
    picked = torch.where(y > 0.5, probability, 1 - probability).clamp_min(tiny)
    return {"test_nll": float(-picked.log().mean()),
            "accuracy": float(((probability > 0.5) == (y > 0.5)).to(torch.float64).mean()),
            "decisiveness": float((2 * probability - 1).abs().mean())}


def regression_cells(method: GGNPosteriorMethod, data, x_plot: Tensor,
                     result: TaskResult, row: str) -> None:
    """NN and GLM predictives of a Gaussian likelihood (see the module docstring)."""
    noise = float(method.noise_variance)
    y = data.y_test
    for kind in PREDICTIVES:
        test_draws = method.function_samples(data.x_test, kind)
        plot_draws = method.function_samples(x_plot, kind)
        if kind == "nn":
            test_mean = test_draws.mean(0)
            nll = mixture_nll(test_draws, y, noise)
            plot_mean, plot_sd = plot_draws.mean(0), plot_draws.std(0)
        else:
            test_mean, test_variance = method.model.glm_function_moments(data.x_test)
            nll = gaussian_nll(test_mean, test_variance + noise, y)
            plot_mean, plot_variance = method.model.glm_function_moments(x_plot)
            plot_sd = plot_variance.sqrt()
        result.add(row, f"{kind}/test_nll", nll)
        result.add(row, f"{kind}/test_rmse", float(((test_mean - y) ** 2).mean().sqrt()))
        result.add(row, f"{kind}/mean_sd", float(plot_sd.mean()))
        result.arrays[f"{kind}/mean"] = plot_mean.tolist()
        result.arrays[f"{kind}/sd"] = plot_sd.tolist()
        for s in range(JOINT_SAMPLES):
            result.arrays[f"{kind}/sample_{s}"] = plot_draws[s].tolist()


def distance_to_training(x: Tensor, x_train: Tensor) -> Tensor:
    """Euclidean distance of each row of ``x`` to its nearest training input."""
    return torch.cdist(x, x_train).min(dim=1).values


def classification_cells(method: GGNPosteriorMethod, data, x_plot: Tensor, result: TaskResult,
                         row: str, near_distance: float, far_distance: float) -> None:
    """NN and GLM predictives of a Bernoulli likelihood and the Figure 5.5b maps."""
    for kind in PREDICTIVES:
        probability = torch.sigmoid(method.function_samples(data.x_test, kind)).mean(0)
        for name, value in bernoulli_scores(probability, data.y_test).items():
            result.add(row, f"{kind}/{name}", value)
        plot_probability = torch.sigmoid(method.function_samples(x_plot, kind)).mean(0)
        result.arrays[f"{kind}/probability"] = plot_probability.tolist()
    mean, variance = method.model.blr_predictive(x_plot)
    weights = method.model.likelihood.hessian(method.model.network.forward_1d(
        method.model.linearisation_point, x_plot))
    model_sd = (variance - weights).clamp_min(0).sqrt()
    result.arrays["blr/model_sd"] = model_sd.tolist()
    result.arrays["blr/noise_sd"] = weights.sqrt().tolist()
    result.arrays["blr/mean"] = mean.tolist()
    distance = distance_to_training(x_plot, data.x_train)
    near, far = distance <= near_distance, distance >= far_distance
    if near.any() and far.any():
        result.add(row, "model_sd_far_over_near",
                   float(model_sd[far].mean() / model_sd[near].mean().clamp_min(1e-300)))


@takes(datasets=(SnelsonGapData, TwoMoonsData), methods=(GGNPosteriorMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit the job's posterior, then both predictives (see the module docstring)."""
    dataset = instantiate(cfg.dataset)
    data = dataset.splits()
    variants = method_variants(cfg.method)
    row = str(cfg.posterior)
    require_choice("posterior", row, list(variants))
    method: GGNPosteriorMethod = instantiate_method(cfg.method, **variants[row])
    seed = int(cfg.seed)
    watch = Stopwatch()
    diagnostics = method.fit(data.training_set(), seed)
    result = TaskResult(fitted=diagnostics, timings={"fit_s": watch.elapsed()})
    watch = Stopwatch()
    x_plot = dataset.plot_inputs()
    if isinstance(method.model.likelihood, BernoulliLikelihood):
        near = require_positive("task.near_distance", float(cfg.task.near_distance))
        far = require_positive("task.far_distance", float(cfg.task.far_distance))
        classification_cells(method, data, x_plot, result, row, near, far)
    else:
        regression_cells(method, data, x_plot, result, row)
    result.timings["predict_s"] = watch.elapsed()
    result.arrays["x_plot"] = x_plot.reshape(-1).tolist()
    result.arrays["x_train"] = data.x_train.reshape(-1).tolist()
    result.arrays["y_train"] = data.y_train.tolist()
    trace = getattr(method, "trace", None)
    if trace is not None:
        result.arrays["trace/train_nll"] = trace.train_nll
        result.arrays["trace/log_det_precision"] = trace.log_det_precision
        result.arrays["trace/mean_change"] = trace.mean_change
    result.fitted["plot_shape"] = list(x_plot.shape)
    result.metrics["n_params"] = float(method.model.network.n_params)
    return result
