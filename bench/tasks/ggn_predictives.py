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
  its average within ``near_distance`` of one);
* both: ``elbo``, the ELBO of the row's q on the training set (:mod:`bench.metrics.elbo`: one
  definition for every q, the reference VI's included), estimated with ``task.elbo_samples``
  draws (stream ``derived_seed([seed, 3])``); its Monte Carlo standard error, expected log
  likelihood and KL go to ``record["fitted"]`` (``elbo_standard_error``, ...).

Health (``record["health"][row]``, :mod:`bench.metrics.fit_health`): every cell finite, the
training NLL of the network at the posterior mean against a constant prediction's, each
predictive's test accuracy against chance (classification) and, where the fit has a stopping
rule, whether the rule ended it.

Arrays: the figure's inputs, per predictive the mean and sd (regression) or the probability
map (classification), three joint function samples per predictive (regression), the BLR model
and noise sd maps (classification), and the fitting trace.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from omegaconf import DictConfig
from torch import Tensor

from bench.contracts.capabilities import FittingTrace, NetworkAndLinearisedSamples
from bench.datasets.snelson import SnelsonGapData
from bench.datasets.two_moons import TwoMoonsData
from bench.harness.errors import require_positive
from bench.harness.fitted_variants import fitted_variants
from bench.harness.result import TaskResult
from bench.harness.rng import derived_seed
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.jobs.toy_runner import ToyJob, finished_toy_record, toy_job
from bench.methods.variational.ggn_natural_gradient import CONVERGED_REASONS
from bench.metrics.elbo import fitted_posterior_elbo
from bench.metrics.fit_health import (
    Check,
    assess,
    chance_check,
    constant_prediction_check,
    constant_prediction_nll,
    finite_check,
    stopping_check,
)
from bench.models.glm_likelihoods import BernoulliLikelihood

PREDICTIVES = ("nn", "glm")
JOINT_SAMPLES = 3
# derived_seed([seed, stream]) stream of the ELBO's draws (the method's streams are 1 and 2).
ELBO_STREAM = 3
TRACE_ARRAYS = ("train_nll", "log_det_precision", "mean_change", "gradient_norm",
                "window_gradient_norm", "elbo_iteration", "elbo", "elbo_improvement",
                "elbo_improvement_standard_error")


def mixture_nll(draws: Tensor, y: Tensor, noise_variance: float) -> float:
    """Mean over points of ``-log 1/S sum_s N(y | f_s, sigma^2)`` for draws ``[S, n]``."""
    log_densities = (-0.5 * math.log(2 * math.pi * noise_variance)
                     - (y - draws) ** 2 / (2 * noise_variance))
    return float(-(torch.logsumexp(log_densities, 0) - math.log(draws.shape[0])).mean())


def gaussian_nll(mean: Tensor, variance: Tensor, y: Tensor) -> float:
    """Mean Gaussian negative log likelihood."""
    return float((0.5 * torch.log(2 * math.pi * variance)
                  + (y - mean) ** 2 / (2 * variance)).mean())


def bernoulli_scores(logits: Tensor, y: Tensor) -> dict[str, float]:
    """Test NLL, accuracy and decisiveness ``mean |2 p - 1|`` of the predictive
    ``p = 1/S sum_s s(f_s)`` from logit draws ``[S, n]``. The NLL takes ``log p`` as
    ``logsumexp_s log s(+-f_s) - log S``: exact for saturated logits, where ``log p`` of the
    probability itself would underflow (a clamp there printed -log(tiny) = 708 per point)."""
    log_mean = math.log(logits.shape[0])
    log_p1 = torch.logsumexp(torch.nn.functional.logsigmoid(logits), 0) - log_mean
    log_p0 = torch.logsumexp(torch.nn.functional.logsigmoid(-logits), 0) - log_mean
    probability = torch.sigmoid(logits).mean(0)
    return {"test_nll": float(-torch.where(y > 0.5, log_p1, log_p0).mean()),
            "accuracy": float(((probability > 0.5) == (y > 0.5)).to(torch.float64).mean()),
            "decisiveness": float((2 * probability - 1).abs().mean())}


def regression_cells(method: NetworkAndLinearisedSamples, data, x_plot: Tensor,
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


def classification_cells(method: NetworkAndLinearisedSamples, data, x_plot: Tensor,
                         result: TaskResult, row: str, near_distance: float,
                         far_distance: float) -> None:
    """NN and GLM predictives of a Bernoulli likelihood and the Figure 5.5b maps."""
    for kind in PREDICTIVES:
        logits = method.function_samples(data.x_test, kind)
        for name, value in bernoulli_scores(logits, data.y_test).items():
            result.add(row, f"{kind}/{name}", value)
        plot_probability = torch.sigmoid(method.function_samples(x_plot, kind)).mean(0)
        result.arrays[f"{kind}/probability"] = plot_probability.tolist()
    likelihood = method.model.likelihood
    f_plot, shift, function_variance = method.model.blr_terms(x_plot)
    weights = likelihood.hessian(f_plot)
    mean = likelihood.mean(f_plot) + weights * shift  # eq. 3.16's mean
    # sqrt(Lambda J Sigma J^T Lambda) taken as Lambda sqrt(J Sigma J^T), not by subtracting
    # Lambda from eq. 3.16's variance (which cancels to rounding noise where Lambda is tiny)
    model_sd = weights * function_variance.sqrt()
    result.arrays["blr/model_sd"] = model_sd.tolist()
    result.arrays["blr/noise_sd"] = weights.sqrt().tolist()
    result.arrays["blr/mean"] = mean.tolist()
    distance = distance_to_training(x_plot, data.x_train)
    near, far = distance <= near_distance, distance >= far_distance
    if near.any() and far.any():
        add_model_sd_ratio(result, row, model_sd[far].mean(), model_sd[near].mean(),
                           f_plot[near].abs().median())


def add_model_sd_ratio(result: TaskResult, row: str, far: Tensor, near: Tensor,
                       near_logit: Tensor) -> None:
    """The cell ``model_sd_far_over_near``, or the cell marked failed when the ratio is not a
    number worth printing: the near-data model sd is 0 or the ratio exceeds ``1 / eps`` (the
    sigmoid saturates, ``Lambda = s (1 - s)`` underflows where ``|f|`` is large)."""
    ratio = float(far / near) if float(near) > 0 else math.inf
    if math.isfinite(ratio) and ratio < 1 / torch.finfo(far.dtype).eps:
        result.add(row, "model_sd_far_over_near", ratio)
        return
    result.fail(row, "model_sd_far_over_near",
                f"model sd near the data {float(near):.3g} vs far {float(far):.3g}: the "
                f"predictive saturates (median |f| near the data {float(near_logit):.3g}, "
                "Lambda = s(1 - s) underflows), so the ratio overflows")


def predictive_cells(cfg: DictConfig, method: NetworkAndLinearisedSamples, job: ToyJob) -> None:
    """Both predictives' cells and arrays (module docstring), the fitting trace and the
    parameter count."""
    result, row = job.result, str(cfg.posterior)
    if isinstance(method.model.likelihood, BernoulliLikelihood):
        near = require_positive("task.near_distance", float(cfg.task.near_distance))
        far = require_positive("task.far_distance", float(cfg.task.far_distance))
        classification_cells(method, job.data, job.x_plot, result, row, near, far)
    else:
        regression_cells(method, job.data, job.x_plot, result, row)
    add_elbo(cfg, method, job, row)
    trace = method.trace if isinstance(method, FittingTrace) else None
    if trace is not None:
        for name in TRACE_ARRAYS:
            result.arrays[f"trace/{name}"] = getattr(trace, name)
    result.metrics["n_params"] = float(method.model.network.n_params)
    result.health[row] = assess(fit_checks(method, job, row))


def add_elbo(cfg: DictConfig, method: NetworkAndLinearisedSamples, job: ToyJob,
              row: str) -> None:
    """The cell ``elbo`` of the row's q on the training set, its standard error and terms
    into ``fitted``."""
    estimate = fitted_posterior_elbo(method.model, float(method.prior_precision),
                                     job.data.x_train, job.data.y_train,
                                     mc_samples=cfg.task.elbo_samples,
                                     seed=derived_seed([job.seed, ELBO_STREAM]),
                                     samples_key="task.elbo_samples")
    job.result.add(row, "elbo", estimate.elbo)
    job.result.fitted.update(estimate.as_dict())


def fit_checks(method: NetworkAndLinearisedSamples, job: ToyJob, row: str) -> list[Check]:
    """The row's health checks (module docstring): cells finite, the training NLL at the
    posterior mean against a constant prediction's, accuracy against chance, the stopping
    rule's verdict where the fit has one."""
    result, data = job.result, job.data
    checks = [finite_check({f"{c.row}/{c.column}": c.value for c in result.cells
                            if c.row == row})]
    model = method.model
    with torch.no_grad():
        f_train = model.network.forward_1d(model.posterior.mean, data.x_train)
        train_nll = float(-model.likelihood.log_prob(f_train, data.y_train).sum())
    bernoulli = isinstance(model.likelihood, BernoulliLikelihood)
    constant = constant_prediction_nll(
        data.y_train.tolist(), "bernoulli" if bernoulli else "gaussian",
        1.0 if bernoulli else float(model.likelihood.noise_variance))
    checks.append(constant_prediction_check(train_nll, constant, len(data.y_train)))
    if bernoulli:
        checks += [chance_check(value, 0.5, len(data.y_test), f"{c.column}")
                   for c in result.cells if c.row == row and c.column.endswith("/accuracy")
                   for value in (c.value,)]
    fitted = result.fitted
    if fitted.get("stopping_rule"):
        checks.append(stopping_check(fitted["stop_reason"] in CONVERGED_REASONS,
                                     f"ended by {fitted['stop_reason']} after "
                                     f"{fitted['iterations']} iterations"))
    if fitted.get("polish_cap"):
        ended = fitted["polish_iterations"] < fitted["polish_cap"]
        checks.append(stopping_check(ended, f"polish ended after {fitted['polish_iterations']} "
                                            f"of at most {fitted['polish_cap']} iterations"))
    return checks


@takes(datasets=(SnelsonGapData, TwoMoonsData), methods=(NetworkAndLinearisedSamples,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit the job's posterior with the job seed (a fit the method stores goes under the job's
    ``results_dir``; ``fit_s``), then both predictives (``predict_s``; module docstring)."""
    dataset, job = toy_job(cfg)
    data = replace(job.data.training_set(), results_dir=str(cfg.results_dir))
    (variant,) = fitted_variants(cfg.method, data, job.seed, posterior=str(cfg.posterior),
                                 protocol=NetworkAndLinearisedSamples)
    job.result.fitted.update(variant.diagnostics)
    job.result.timings["fit_s"] = variant.fit_s
    watch = Stopwatch()
    predictive_cells(cfg, variant.method, job)
    job.result.timings["predict_s"] = watch.elapsed()
    return finished_toy_record(job)
