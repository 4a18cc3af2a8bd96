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

from bench.curvature.base import Curvature
from bench.curvature.dense import BlockDiagonal
from bench.curvature.diagonal import Diagonal
from bench.curvature.flat import FlatBackend
from bench.curvature.kronecker import Kronecker
from bench.datasets.cubic import CubicToyData
from bench.harness.errors import require_choice, require_positive
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.models.mlp import MLPShape, init_parameters
from bench.training.loop import TrainingConfig, fit_parameters
from bench.training.refit import batched_outputs

STRUCTURE_ROWS = {"diag": "Diag", "kfac": "KFAC", "ekfac": "EKFAC", "bdiag": "B-Diag"}


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


def toy_curvature(structure: str, shape: MLPShape, theta: Tensor, x: Tensor) -> Curvature:
    """Unit-noise GGN ``sum_i J_i J_i^T`` of the flat MLP in one structure."""
    require_choice("method.structure", structure, STRUCTURE_ROWS)
    backend = FlatBackend(shape, theta)
    if structure == "diag":
        return Diagonal.from_backend(backend, x, None)
    if structure == "kfac":
        return Kronecker.from_backend(backend, x, None)
    if structure == "ekfac":
        from bench.curvature.eigen_kronecker import EigenKronecker
        return EigenKronecker.from_backend(backend, x, None)
    dense = backend.ggn_matrix(x, None)
    index = [torch.arange(s.start, s.stop) for s in shape.layer_slices()]
    return BlockDiagonal.of(dense, index)


def predictive_draws(posterior: Curvature, shape: MLPShape, theta: Tensor, x: Tensor,
                     n_samples: int, generator: torch.Generator) -> Tensor:
    """Network outputs ``[S, n]`` at ``x`` for ``S`` exact draws from ``N(theta, H^-1)``."""
    z = torch.randn(n_samples, len(theta), generator=generator, dtype=theta.dtype)
    return batched_outputs(shape, theta + posterior.inverse_sqrt(z), x)


@takes(datasets=(CubicToyData,))
def run(cfg: DictConfig) -> TaskResult:
    """Train once, then each structure's NN-sampling predictive on the grid."""
    data: CubicToyData = instantiate(cfg.dataset)
    method = cfg.method
    temperature = require_positive("method.temperature", float(method.temperature))
    delta = require_positive("method.prior_precision", float(method.prior_precision))
    n_samples = require_positive("method.n_samples", int(method.n_samples))
    structures = [require_choice("method.structures", s, STRUCTURE_ROWS)
                  for s in method.structures]
    seed = int(cfg.seed)
    toy = data.splits(seed)
    activation = str(cfg.network.activation)
    shape = MLPShape((1, *cfg.network.hidden, 1), activation)
    generator = torch.Generator().manual_seed(seed)
    watch = Stopwatch()
    theta = train_toy_network(shape, toy.x_train, toy.y_train,
                              noise_variance=data.noise_variance, prior_precision=delta,
                              lr=float(cfg.network.lr), steps=int(cfg.network.steps),
                              generator=generator)
    result = TaskResult(timings={"train_s": watch.elapsed()})
    fresh = CubicToyData(n_points=1000, x_low=data.x_low, x_high=data.x_high,
                          noise_variance=data.noise_variance).splits(seed + 1)
    with torch.no_grad():
        f_map = shape.forward_1d(theta, toy.x_test)
        train_mse = float(((shape.forward_1d(theta, toy.x_train) - toy.y_train) ** 2).mean())
    result.metrics.update({"train_mse": train_mse, "n_params": float(shape.n_params)})
    result.arrays.update({"x": toy.x_test[:, 0].tolist(), "truth": toy.f_test.tolist(),
                          "map": f_map.tolist(), "x_train": toy.x_train[:, 0].tolist(),
                          "y_train": toy.y_train.tolist()})
    inside = (toy.x_test[:, 0] >= data.x_low) & (toy.x_test[:, 0] <= data.x_high)
    for structure in structures:
        row = STRUCTURE_ROWS[structure]
        watch = Stopwatch()
        ggn = toy_curvature(structure, shape, theta, toy.x_train)
        posterior = ggn.scaled(temperature / data.noise_variance, delta)
        draw_generator = torch.Generator().manual_seed(seed + 1)
        draws = predictive_draws(posterior, shape, theta, toy.x_test, n_samples, draw_generator)
        test_draws = predictive_draws(posterior, shape, theta, fresh.x_train, n_samples,
                                      torch.Generator().manual_seed(seed + 1))
        mean, sd = draws.mean(0), draws.std(0)
        variance = test_draws.var(0) + data.noise_variance
        nll = (0.5 * torch.log(2 * math.pi * variance)
               + (fresh.y_train - test_draws.mean(0)) ** 2 / (2 * variance)).mean()
        result.add(row, f"{activation}/mean_sd", float(sd.mean()))
        result.add(row, f"{activation}/mean_sd_train_range", float(sd[inside].mean()))
        result.add(row, f"{activation}/test_nll", float(nll))
        result.arrays[f"{row}/mean"] = mean.tolist()
        result.arrays[f"{row}/sd"] = sd.tolist()
        result.timings[f"{structure}_s"] = watch.elapsed()
    return result
