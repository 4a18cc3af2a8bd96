"""Training the working network of the subnetwork paper: AdamW, step-decayed learning rate.

Appendix A (Experiment 1): lr 0.01, times 0.1 every 500 epochs, 1500 epochs. Appendix D
(Experiment 2): lr 0.01 (regression; classification mis-specified) or 0.001 (classification
well-specified), times 0.1 every 1000 epochs, 2000 epochs. 10% of the training data is held
out for validation (the paper used it to choose these settings; we record its loss).

Readings where the paper is silent:

* objective: the paper trains with "IID N(0, 1) priors on the weights and biases, and the noise
  variance sigma0^2 = 1", i.e. to the MAP at which Omega is formed, so the loss is the negative
  log posterior divided by the number of fit points: ``MSE / (2 sigma0^2)`` (regression) or mean
  BCE-with-logits (classification) plus ``|theta|^2 / (2 v N_fit)``; AdamW's own decoupled
  weight decay is 0 by default (``prior_variance=None`` trains the plain loss instead);
* batches: not stated; full batch by default (one step per epoch), ``batch_size`` for minibatches;
* initialisation: not stated; PyTorch's default ``nn.Linear`` initialisation;
* the fitted weights are those of the last epoch (no early stopping is described).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.nn.functional import binary_cross_entropy_with_logits

from bench.harness.errors import require_choice
from bench.models.mlp import MLPShape, init_parameters
from bench.training.loop import TrainingConfig, fit_parameters


@dataclass(frozen=True)
class Schedule:
    """AdamW learning rate ``lr`` multiplied by ``decay_factor`` every ``decay_every`` epochs."""

    lr: float
    epochs: int
    decay_every: int
    decay_factor: float = 0.1


EXP1_SCHEDULE = Schedule(lr=0.01, epochs=1500, decay_every=500)
EXP2_SCHEDULES = {
    ("regression", "misspecified"): Schedule(lr=0.01, epochs=2000, decay_every=1000),
    ("regression", "wellspecified"): Schedule(lr=0.01, epochs=2000, decay_every=1000),
    ("classification", "misspecified"): Schedule(lr=0.01, epochs=2000, decay_every=1000),
    ("classification", "wellspecified"): Schedule(lr=0.001, epochs=2000, decay_every=1000),
}


def exp2_schedule(likelihood: str, specification: str) -> Schedule:
    """Appendix D's schedule of the setting ``(likelihood, specification)``."""
    key = (likelihood, specification)
    return EXP2_SCHEDULES[require_choice("setting", key, EXP2_SCHEDULES)]


# The schedule of each experiment given the setting: Appendix A's one schedule (exp1) or
# Appendix D's per setting (exp2).
PAPER_SCHEDULES: dict[str, Callable[[str, str], Schedule]] = {
    "exp1": lambda likelihood, specification: EXP1_SCHEDULE, "exp2": exp2_schedule}


def paper_schedule(experiment: str, likelihood: str, specification: str) -> Schedule:
    """The schedule Appendix A (``exp1``) or Appendix D (``exp2``) gives for a setting."""
    return PAPER_SCHEDULES[require_choice("experiment", experiment, PAPER_SCHEDULES)](
        likelihood, specification)


def validation_split(x: Tensor, y: Tensor, fraction: float, generator: torch.Generator):
    """Random ``(x_fit, y_fit, x_val, y_val)`` with ``round(fraction * n)`` validation points."""
    order = torch.randperm(x.shape[0], generator=generator)
    n_val = round(fraction * x.shape[0])
    val, fit = order[:n_val], order[n_val:]
    return x[fit], y[fit], x[val], y[val]


def gaussian_loss(f: Tensor, y: Tensor, noise_variance: float = 1.0) -> Tensor:
    """Mean Gaussian negative log likelihood up to constants: ``(y-f)^2 / (2 sigma0^2)``."""
    return ((y - f) ** 2).mean() / (2 * noise_variance)


def bernoulli_loss(f: Tensor, y: Tensor, noise_variance: float = 1.0) -> Tensor:
    """Mean binary cross-entropy of the logits ``f`` (no noise variance)."""
    return binary_cross_entropy_with_logits(f, y)


DATA_LOSSES: dict[str, Callable[[Tensor, Tensor, float], Tensor]] = {
    "regression": gaussian_loss, "classification": bernoulli_loss}


def data_loss(f: Tensor, y: Tensor, likelihood: str, noise_variance: float = 1.0) -> Tensor:
    """Mean negative log likelihood up to constants: ``(y-f)^2 / (2 sigma0^2)`` or BCE."""
    return DATA_LOSSES[require_choice("likelihood", likelihood, DATA_LOSSES)](
        f, y, noise_variance)


@dataclass
class TrainedWorkingModel:
    """theta-hat of the working network and the data it was fitted on."""

    network: MLPShape
    theta: Tensor
    x_fit: Tensor
    y_fit: Tensor
    x_val: Tensor
    y_val: Tensor
    diagnostics: dict = field(default_factory=dict)

    def predict(self, x: Tensor) -> Tensor:
        """``f_theta-hat(x)`` ``[n]``."""
        with torch.no_grad():
            return self.network.forward_1d(self.theta, x)


def train_working_network(network: MLPShape, x: Tensor, y: Tensor, likelihood: str,
                          schedule: Schedule, generator: torch.Generator, *,
                          prior_variance: float | None = 1.0, noise_variance: float = 1.0,
                          validation_fraction: float = 0.1, batch_size: int | None = None,
                          weight_decay: float = 0.0) -> TrainedWorkingModel:
    """Fit ``network`` by AdamW on the non-validation part of ``(x, y)`` (float64)."""
    loss_of = DATA_LOSSES[require_choice("likelihood", likelihood, DATA_LOSSES)]
    x_fit, y_fit, x_val, y_val = validation_split(x, y, validation_fraction, generator)
    theta = init_parameters(network, generator, dtype=torch.float64).requires_grad_(True)
    n_fit = x_fit.shape[0]

    def batch_loss(rows: Tensor | slice) -> Tensor:
        loss = loss_of(network.forward_1d(theta, x_fit[rows]), y_fit[rows], noise_variance)
        if prior_variance is not None:
            loss = loss + (theta**2).sum() / (2 * prior_variance * n_fit)
        return loss

    config = TrainingConfig(
        lr=schedule.lr, max_epochs=schedule.epochs, optimizer="adamw", weight_decay=weight_decay,
        batch_size=None if batch_size is None or batch_size >= n_fit else batch_size,
        schedule="step", step_every=schedule.decay_every, step_factor=schedule.decay_factor,
    )
    fit_parameters([theta], batch_loss, n_rows=n_fit, config=config, generator=generator,
                   desc="working network")
    theta = theta.detach()
    with torch.no_grad():
        diagnostics = {
            "train_loss": float(loss_of(network.forward_1d(theta, x_fit), y_fit,
                                        noise_variance)),
            "val_loss": float(loss_of(network.forward_1d(theta, x_val), y_val,
                                      noise_variance)) if len(y_val) else float("nan"),
        }
    return TrainedWorkingModel(network, theta, x_fit, y_fit, x_val, y_val, diagnostics)


def mean_function_fitter(network: MLPShape, likelihood: str, schedule: Schedule,
                         **training_options) -> Callable:
    """``fit(x, y, generator) -> predict`` for the Split and Ensemble baselines."""

    def fit(x: Tensor, y: Tensor, generator: torch.Generator) -> Callable[[Tensor], Tensor]:
        return train_working_network(network, x, y, likelihood, schedule, generator,
                                     **training_options).predict

    return fit
