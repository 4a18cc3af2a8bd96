"""Model selection by the Laplace-GGN marginal likelihood (GGN thesis Section 5.1, Figures
5.2 and 5.3).

One job = one row of the hyperparameter grid: every prior precision ``delta`` of the log grid
``grid.prior_precision`` with, for a Gaussian likelihood, the noise variance
``sigma^2 = grid.noise_variance[grid.noise_variance_index]`` (a Bernoulli likelihood has no
noise variance: ``grid.noise_variance`` is null). All networks of the row start from the
shared initialisation of the job seed and are trained at once by the method
(:meth:`bench.methods.laplace.ggn_methods.LaplaceGGN.fit_grid`, the training of its own MAP:
full-batch Adam of the node's ``lr``, ``steps`` and ``lr_schedule``; with the node's
``polish_iterations > 0`` each Adam end point is then polished by full-batch L-BFGS to
``|grad L| <= polish_tolerance``). At each MAP
``theta*``:

* ``log_evidence``: eq. 3.17-3.18 at ``mu = theta*`` (function-space log-determinant);
* ``train_ll`` / ``test_ll``: the average log likelihood at the MAP (eq. 5.1);
* diagnostics: ``|grad L|``, ``|mu_BLR - theta*| / |theta*|`` (eq. 3.12) and eq. 3.19's exact
  linearised evidence (equal to ``log_evidence`` at a stationary ``theta*``); after a polish
  also Adam's ``|grad L|`` before it (``adam_gradient_norm``) and the L-BFGS iterations
  (``polish_iterations``);
* the GLM predictive on the figure's inputs: the linearised function's mean and sd
  (regression, sigma^2 not added) or the probability ``E[s(f_lin)]`` from
  ``n_predictive_samples`` draws of each point's ``N(f*, J Sigma J^T)`` (classification).

Cells: row ``sigma2=<value>`` (regression) or ``bernoulli``, followed by the experiment's
``row_suffix`` when it sets one (a side run's rows, e.g. ``bernoulli (data noise 0.1)``), columns
``delta=<value>/<quantity>``; per row also ``argmax_delta`` and ``max_log_evidence``. Arrays
hold the same per network, plus the predictive curves or maps, for the figures. Health
(``record["health"][row]``, :func:`bench.metrics.fit_health.grid_checks`): the evidence finite
and, after a polish, every network's polish ended by its rule before its iteration cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from omegaconf import DictConfig
from torch import Tensor

from bench.contracts.capabilities import FullBatchMAP
from bench.datasets.snelson import SnelsonGapData
from bench.datasets.two_moons import TwoMoonsData
from bench.harness.errors import ConfigError, require_positive
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.rng import derived_seed, make_generator
from bench.harness.task_inputs import capability, takes
from bench.harness.timing import Stopwatch
from bench.jobs.toy_runner import ToyJob, finished_toy_record, toy_job
from bench.methods.laplace.ggn_laplace import (
    FunctionSpaceGGN,
    laplace_ggn_log_evidence,
    linearised_log_evidence,
)
from bench.methods.laplace.ggn_methods import DRAW_STREAM
from bench.metrics.fit_health import assess, grid_checks
from bench.models.glm_likelihoods import GaussianLikelihood, Likelihood, make_likelihood
from bench.models.mlp import MLPShape
from bench.training.network_grid import GridFit


def log_grid(node, key: str) -> list[float]:
    """``points`` values evenly spaced in log10 from ``low`` to ``high`` (both positive)."""
    if node is None:
        raise ConfigError(f"{key} is missing; give {{low, high, points}}")
    low, high, points = node.get("low"), node.get("high"), node.get("points")
    for name, value in (("low", low), ("high", high)):
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{key}.{name}={value!r} is not valid; grid values must be "
                              "positive numbers")
    if not isinstance(points, int) or isinstance(points, bool) or points < 1:
        raise ConfigError(f"{key}.points={points!r} is not valid; it must be a positive integer")
    if low > high:
        raise ConfigError(f"{key}.low={low} must not exceed {key}.high={high}")
    if points == 1:
        return [float(low)]
    step = (math.log10(high) - math.log10(low)) / (points - 1)
    return [10 ** (math.log10(low) + k * step) for k in range(points)]


def noise_variance_of_job(grid: DictConfig, likelihood: str) -> float | None:
    """This job's sigma^2 (Gaussian) or None (Bernoulli, which takes no grid over it)."""
    if likelihood == "bernoulli":
        if grid.get("noise_variance") is not None:
            raise ConfigError("grid.noise_variance must be null for method.likelihood="
                              "bernoulli (the Bernoulli likelihood has no noise variance)")
        return None
    values = log_grid(grid.get("noise_variance"), "grid.noise_variance")
    index = grid.get("noise_variance_index")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(values):
        raise ConfigError(f"grid.noise_variance_index={index!r} is not valid; choose one of: "
                          f"0..{len(values) - 1}")
    return values[index]


def row_label(noise_variance: float | None) -> str:
    """The cells' row: ``sigma2=<value>`` or ``bernoulli``."""
    return "bernoulli" if noise_variance is None else f"sigma2={noise_variance:.3g}"


def glm_probability(mean: Tensor, variance: Tensor, n_samples: int,
                    generator: torch.Generator) -> Tensor:
    """``E[s(f)]`` for ``f ~ N(mean, variance)`` per point by ``n_samples`` draws."""
    noise = torch.randn(n_samples, *mean.shape, generator=generator, dtype=mean.dtype)
    return torch.sigmoid(mean + variance.sqrt() * noise).mean(0)


def evaluate_network(network: MLPShape, theta: Tensor, likelihood: Likelihood, delta: float,
                     data, x_plot: Tensor, n_samples: int,
                     generator: torch.Generator) -> dict[str, object]:
    """Evidence, log likelihoods, diagnostics and the GLM predictive of one trained network."""
    x, y = data.x_train, data.y_train
    with torch.no_grad():
        f = network.forward_1d(theta, x)
        f_test = network.forward_1d(theta, data.x_test)
        f_plot = network.forward_1d(theta, x_plot)
    jacobian = network.jacobian(theta, x)
    function_space = FunctionSpaceGGN.fit(jacobian, likelihood.hessian(f), delta)
    gradient = jacobian.T @ likelihood.residual(f, y) - delta * theta
    variance = function_space.function_variance(network.jacobian(theta, x_plot))
    if isinstance(likelihood, GaussianLikelihood):
        predictive = {"glm_mean": f_plot, "glm_sd": variance.sqrt()}
    else:
        predictive = {"glm_probability": glm_probability(f_plot, variance, n_samples,
                                                         generator)}
    return {
        "log_evidence": laplace_ggn_log_evidence(likelihood, f, y, jacobian, theta, delta),
        "linearised_log_evidence": linearised_log_evidence(likelihood, f, y, jacobian, theta,
                                                           delta),
        "train_ll": float(likelihood.log_prob(f, y).mean()),
        "test_ll": float(likelihood.log_prob(f_test, data.y_test).mean()),
        "blr_mean_shift": float(function_space.solve(gradient).norm() / theta.norm()),
        **predictive,
    }


SCALARS = ("log_evidence", "train_ll", "test_ll", "linearised_log_evidence",
           "blr_mean_shift", "gradient_norm")
# Per grid point as well when the Adam end points are polished.
POLISH_SCALARS = ("adam_gradient_norm", "polish_iterations")


@dataclass(frozen=True)
class NetworkGrid:
    """The row's trained networks: the network shape, the likelihood (its sigma^2 None for a
    Bernoulli one), the prior precisions and the fit (``theta`` per precision)."""

    network: MLPShape
    likelihood: Likelihood
    noise_variance: float | None
    deltas: list[float]
    fit: GridFit


def train_row(cfg: DictConfig, method: FullBatchMAP, job: ToyJob) -> NetworkGrid:
    """The row's networks, trained at once by the method (:meth:`FullBatchMAP.fit_grid`:
    from the seed's shared initialisation, polished where the method asks; ``train_s``,
    ``polish_s``)."""
    data, result = job.data, job.result
    deltas = log_grid(cfg.grid.get("prior_precision"), "grid.prior_precision")
    noise_variance = noise_variance_of_job(cfg.grid, method.likelihood)
    require_positive("method.n_predictive_samples", method.n_predictive_samples)
    likelihood = (make_likelihood("bernoulli") if noise_variance is None
                  else GaussianLikelihood(noise_variance))
    fit, seconds = method.fit_grid(data.x_train, data.y_train, likelihood, deltas, job.seed,
                                   desc=f"{len(deltas)} networks")
    result.timings.update(seconds)
    return NetworkGrid(method.network(data.input_dim), likelihood, noise_variance, deltas, fit)


def evaluated_grid(grid: NetworkGrid, job: ToyJob, n_samples: int) -> dict[str, list]:
    """Quantity -> its value at each network of the grid (:func:`evaluate_network`, the
    gradient norms and, after a polish, Adam's gradient norms and the L-BFGS iterations)."""
    fit = grid.fit
    generator = make_generator(derived_seed([job.seed, DRAW_STREAM]))
    values: dict[str, list] = {}
    for b, delta in enumerate(grid.deltas):
        evaluated = evaluate_network(grid.network, fit.theta[b], grid.likelihood, delta,
                                     job.data, job.x_plot, n_samples, generator)
        evaluated["gradient_norm"] = float(fit.gradient_norm[b])
        if fit.adam_gradient_norm is not None:
            evaluated["adam_gradient_norm"] = float(fit.adam_gradient_norm[b])
            evaluated["polish_iterations"] = fit.polish_iterations[b]
        for name, value in evaluated.items():
            values.setdefault(name, []).append(value)
    return values


def grid_cells(cfg: DictConfig, method: FullBatchMAP, job: ToyJob, grid: NetworkGrid) -> None:
    """Cells, arrays and metrics of the row (module docstring)."""
    result, deltas = job.result, grid.deltas
    values = evaluated_grid(grid, job, int(method.n_predictive_samples))
    polished = grid.fit.adam_gradient_norm is not None
    scalars = SCALARS + (POLISH_SCALARS if polished else ())
    row = row_label(grid.noise_variance) + str(cfg.get("row_suffix") or "")
    for b, delta in enumerate(deltas):
        for name in scalars:
            result.add(row, f"delta={delta:.3g}/{name}", values[name][b])
        for name in ("glm_mean", "glm_sd", "glm_probability"):
            if name in values:
                result.arrays[f"delta={delta:.3g}/{name}"] = values[name][b].tolist()
    best = max(range(len(deltas)), key=lambda b: values["log_evidence"][b])
    result.add(row, "argmax_delta", deltas[best])
    result.add(row, "max_log_evidence", values["log_evidence"][best])
    result.arrays["prior_precision"] = deltas
    for name in scalars:
        result.arrays[name] = [float(v) for v in values[name]]
    n_params = grid.network.n_params
    result.fitted.update({"noise_variance": grid.noise_variance,
                          "likelihood": grid.likelihood.name, "n_params": n_params,
                          "n_networks": len(deltas)})
    gap = max(abs(a - b) for a, b in zip(values["log_evidence"],
                                         values["linearised_log_evidence"], strict=True))
    result.metrics.update({"max_blr_mean_shift": max(values["blr_mean_shift"]),
                           "max_evidence_gap_eq_3_19": gap,
                           "max_gradient_norm": max(values["gradient_norm"]),
                           "n_params": float(n_params)})
    if polished:
        result.metrics["max_adam_gradient_norm"] = max(values["adam_gradient_norm"])
    cap = int(method.polish_iterations) if polished else None
    result.health[row] = assess(grid_checks(result.arrays, cap))


@takes(datasets=(SnelsonGapData, TwoMoonsData), methods=(FullBatchMAP,))
def run(cfg: DictConfig) -> TaskResult:
    """Train the row's networks at once, then evaluate each (``evaluate_s``; see the module
    docstring)."""
    dataset, job = toy_job(cfg)
    method = capability(instantiate_method(cfg.method), FullBatchMAP)
    grid = train_row(cfg, method, job)
    watch = Stopwatch()
    grid_cells(cfg, method, job, grid)
    job.result.timings["evaluate_s"] = watch.elapsed()
    return finished_toy_record(job)
