"""Predictive uncertainty of a small regression network under four Hessian structures.

Generalized Laplace paper, Figure 2: a 1-7-7-1 network fitted to the cubic toy by full-batch
Adam on ``sum (y - f)^2 / (2 sigma^2) + (delta / 2) |theta|^2`` (the paper states neither the
depth reading, the activation nor the training: notes section 3 [R] values are the config
defaults); then for each structure (Diag, KFAC, EKFAC, B-Diag) the tempered Laplace
posterior ``N(theta-hat, (T F + delta I)^-1)`` with ``F = sigma^-2 sum J^T J`` (the GGN, which
equals the Fisher for a Gaussian likelihood) and the NN-sampling predictive: ``S`` exact draws
pushed through the network on the plotting grid.

One job = one seed (data draw, initialisation and posterior draws). Cells: row = structure
(paper name), columns ``<activation>/<metric>``: ``mean_sd`` (function-space predictive sd
averaged over the plotting range, the paper's shading), ``mean_sd_train_range`` (the same on
``[x_low, x_high]``) and ``test_nll`` (Gaussian NLL of fresh toy points on the training range
with sigma^2 added). Arrays: the grid, the truth, the MAP and per structure the predictive
mean and sd, for the figure.
"""

from __future__ import annotations

import math

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from bench.contracts.capabilities import TemperedFunctionSamples
from bench.datasets.cubic import CubicToyData
from bench.datasets.training_set import TrainingSet
from bench.harness.fitted_variants import built_variants
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.models.mlp import MLPShape, init_parameters
from bench.training.loop import TrainingConfig, fit_parameters


def train_toy_network(shape: MLPShape, x: Tensor, y: Tensor, *, noise_variance: float,
                      prior_precision: float, lr: float, steps: int,
                      generator: torch.Generator) -> Tensor:
    """theta-hat: full-batch Adam on the negative log joint (float64), init from ``generator``."""
    theta = init_parameters(shape, generator, torch.float64).requires_grad_(True)

    def loss(_rows) -> Tensor:
        residual = y - shape.forward_1d(theta, x)
        return ((residual**2).sum() / (2 * noise_variance)
                + 0.5 * prior_precision * theta.pow(2).sum())

    fit_parameters([theta], loss, n_rows=len(y), config=TrainingConfig(lr=lr, max_epochs=steps),
                   desc="toy network")
    return theta.detach()


def gaussian_nll(samples: Tensor, y: Tensor, noise_variance: float) -> float:
    """Mean NLL of ``y`` under N(sample mean, sample variance + sigma^2) per point."""
    variance = samples.var(0) + noise_variance
    return float((0.5 * torch.log(2 * math.pi * variance)
                  + (y - samples.mean(0)) ** 2 / (2 * variance)).mean())


@takes(datasets=(CubicToyData,), methods=(TemperedFunctionSamples,))
def run(cfg: DictConfig) -> TaskResult:
    """Train once, then each structure's NN-sampling predictive on the grid."""
    data: CubicToyData = instantiate(cfg.dataset)
    seed = int(cfg.seed)
    toy = data.splits(seed)
    activation = str(cfg.network.activation)
    shape = MLPShape((1, *cfg.network.hidden, 1), activation)
    methods = dict(built_variants(cfg.method, cfg.get("posterior"),
                                  TemperedFunctionSamples))
    delta = next(iter(methods.values())).prior_precision
    watch = Stopwatch()
    theta = train_toy_network(shape, toy.x_train, toy.y_train,
                              noise_variance=data.noise_variance, prior_precision=delta,
                              lr=float(cfg.network.lr), steps=int(cfg.network.steps),
                              generator=torch.Generator().manual_seed(seed))
    result = TaskResult(timings={"train_s": watch.elapsed()})
    fresh = CubicToyData(n_points=1000, x_low=data.x_low, x_high=data.x_high,
                         noise_variance=data.noise_variance).splits(seed + 1)
    network = shape.module(theta).to(cfg.device)
    with torch.no_grad():
        f_map = shape.forward_1d(theta, toy.x_test)
        train_mse = float(((shape.forward_1d(theta, toy.x_train) - toy.y_train) ** 2).mean())
    result.metrics.update({"train_mse": train_mse, "n_params": float(shape.n_params)})
    result.arrays.update({"x": toy.x_test[:, 0].tolist(), "truth": toy.f_test.tolist(),
                          "map": f_map.tolist(), "x_train": toy.x_train[:, 0].tolist(),
                          "y_train": toy.y_train.tolist()})
    inside = (toy.x_test[:, 0] >= data.x_low) & (toy.x_test[:, 0] <= data.x_high)
    training = TrainingSet(toy.x_train.to(cfg.device), toy.y_train.unsqueeze(1).to(cfg.device))
    for row, method in methods.items():
        watch = Stopwatch()
        result.fitted[row] = method.fit(training, seed, base=network)
        draws = method.function_samples(toy.x_test.to(cfg.device), method.temperature)[..., 0]
        fresh_draws = method.function_samples(fresh.x_train.to(cfg.device),
                                              method.temperature)[..., 0]
        mean, sd = draws.mean(0).cpu(), draws.std(0).cpu()
        result.add(row, f"{activation}/mean_sd", float(sd.mean()))
        result.add(row, f"{activation}/mean_sd_train_range", float(sd[inside].mean()))
        result.add(row, f"{activation}/test_nll",
                   gaussian_nll(fresh_draws.cpu(), fresh.y_train, data.noise_variance))
        result.arrays[f"{row}/mean"] = mean.tolist()
        result.arrays[f"{row}/sd"] = sd.tolist()
        result.timings[f"{row}_s"] = watch.elapsed()
    return result
