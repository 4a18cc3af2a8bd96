"""One training loop for networks held as flat parameter tensors or as modules: the caller gives
the parameters (leaf tensors, updated in place) and a loss closure over a batch of row indices;
the loop owns the optimizer (unless the caller passes its own, e.g. a sampler's update rule), the
learning-rate schedule (per epoch or per step), the minibatch order, early stopping and a
progress bar over the epochs (:func:`bench.harness.progress.progress`, silent in CI). An
``on_epoch_end`` callback sees the optimizer and schedule after every epoch (to checkpoint them),
and ``resume`` continues from such a checkpoint at epoch granularity. ``epoch_batches`` hands the
loop another minibatch order, e.g. a ``DataLoader`` iterated once per epoch as Lightning does
(:func:`bench.training.regression_network.train_paper_mlp`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from bench.harness.errors import ConfigError, require_choice
from bench.harness.progress import progress
from bench.training.optimizer_choices import OPTIMIZER_BUILDERS, SCHEDULE_BUILDERS, SCHEDULE_UNITS

OPTIMIZERS = tuple(OPTIMIZER_BUILDERS)
SCHEDULES = tuple(SCHEDULE_BUILDERS)
ALL_ROWS = slice(None)


@dataclass(frozen=True)
class TrainingConfig:
    """How :func:`fit_parameters` trains.

    ``batch_size=None``: full batch, one step per epoch, nothing drawn. Otherwise each epoch
    draws ``torch.randperm(n_rows, generator=...)`` and steps on its consecutive chunks of
    ``batch_size`` rows, even when one chunk holds every row. ``schedule="step"`` multiplies
    the learning rate by ``step_factor`` every ``step_every`` epochs (StepLR); ``"cosine"``
    anneals it to ``min_lr`` over ``max_epochs``. ``schedule_unit="step"`` advances the schedule
    after every optimizer step instead of every epoch: ``step_every`` then counts steps and
    the cosine runs over ``max_epochs * ceil(n_rows / batch_size)`` steps (as the Laplace Redux
    BBB code does). ``optimizer="sgd"`` uses ``momentum`` and
    ``nesterov`` (ignored by Adam and AdamW); ``weight_decay`` is the optimizer's own (L2 added
    to the gradient for Adam and SGD, decoupled for AdamW). ``patience``: stop once the
    validation objective has not improved for that many epochs (None: never);
    ``restore_best``: end with the best validation epoch's parameters.
    """

    lr: float
    max_epochs: int
    batch_size: int | None = None
    optimizer: str = "adam"
    weight_decay: float = 0.0
    schedule: str = "none"
    schedule_unit: str = "epoch"
    step_every: int = 1
    step_factor: float = 0.1
    min_lr: float = 0.0
    momentum: float = 0.0
    nesterov: bool = False
    patience: int | None = None
    restore_best: bool = True

    def __post_init__(self) -> None:
        require_choice("training.optimizer", self.optimizer, OPTIMIZERS)
        require_choice("training.schedule", self.schedule, SCHEDULES)
        require_choice("training.schedule_unit", self.schedule_unit, SCHEDULE_UNITS)
        if self.nesterov and (self.optimizer != "sgd" or self.momentum <= 0):
            raise ConfigError(f"training.nesterov=True needs optimizer='sgd' and momentum > 0, "
                              f"got optimizer={self.optimizer!r}, momentum={self.momentum!r}")


@dataclass(frozen=True)
class LoopState:
    """Where :func:`fit_parameters` stands after ``epochs_done`` epochs: the optimizer's and
    the schedule's ``state_dict`` (None without a schedule). The parameters and the minibatch
    generator belong to the caller, who saves and restores them alongside."""

    epochs_done: int
    optimizer: dict
    scheduler: dict | None


@dataclass(frozen=True)
class TrainingHistory:
    """Epochs run, the best validation epoch (-1 if none improved on infinity or there was
    no validation) with its value, and the last epoch's validation value (NaN if none)."""

    epochs: int
    best_epoch: int
    best_validation: float
    last_validation: float


def fit_parameters(parameters: Sequence[Tensor], batch_loss: Callable[[Any], Tensor],
                   *, n_rows: int, config: TrainingConfig,
                   generator: torch.Generator | None = None,
                   validation: Callable[[], Tensor | float] | None = None,
                   desc: str = "training",
                   on_epoch_end: Callable[[LoopState], None] | None = None,
                   resume: LoopState | None = None,
                   optimizer: torch.optim.Optimizer | None = None,
                   epoch_batches: Callable[[], Iterable] | None = None) -> TrainingHistory:
    """Minimise ``batch_loss(rows)`` over ``parameters`` by ``config``.

    ``rows`` is a LongTensor of row indices, or :data:`ALL_ROWS` (``slice(None)``) when
    training full batch. ``validation()``, if given, is evaluated without gradients after
    every epoch (after the schedule's step); a non-finite value stops training at once.
    ``on_epoch_end(state)`` runs after every epoch (after the validation). ``resume``: start
    after ``resume.epochs_done`` epochs with that optimizer and schedule state; the caller has
    restored the parameters and the generator, so the run continues exactly as it would have
    without the interruption (not with ``validation``, whose best epoch is not saved).
    ``optimizer``: one the caller built over ``parameters`` (e.g. a sampler's update rule),
    used instead of the one ``config`` names; ``config.lr``, ``optimizer``, ``weight_decay``
    and ``momentum`` are then unused. ``epoch_batches()``: called once per epoch, its items
    are handed to ``batch_loss`` in turn instead of the rows the config would draw (which it
    then does not draw); ``config.batch_size`` then only sets the steps per epoch of a
    per-step schedule.
    """
    if config.batch_size is not None and generator is None and epoch_batches is None:
        raise ValueError("minibatch training needs an explicit torch.Generator")
    if resume is not None and validation is not None:
        raise ValueError("resuming does not restore early-stopping state; pass no validation")
    if optimizer is None:
        optimizer = OPTIMIZER_BUILDERS[config.optimizer](parameters, config)
    steps_per_epoch = (1 if config.batch_size is None
                       else math.ceil(n_rows / config.batch_size))
    unit = SCHEDULE_UNITS[config.schedule_unit]
    scheduler = SCHEDULE_BUILDERS[config.schedule](
        optimizer, config, unit.units(config.max_epochs, steps_per_epoch))
    per_step = scheduler is not None and unit.per_step
    start = 0
    if resume is not None:
        optimizer.load_state_dict(resume.optimizer)
        if scheduler is not None:
            scheduler.load_state_dict(resume.scheduler)
        start = resume.epochs_done
    best_state = [p.detach().clone() for p in parameters]
    best_value, best_epoch, value, epoch = math.inf, -1, math.nan, start - 1
    for epoch in progress(range(start, config.max_epochs), desc=desc, unit="epoch"):
        if epoch_batches is not None:
            batches = epoch_batches()
        elif config.batch_size is None:
            batches = [ALL_ROWS]
        else:
            batches = torch.randperm(n_rows, generator=generator).split(config.batch_size)
        for rows in batches:
            optimizer.zero_grad()
            batch_loss(rows).backward()
            optimizer.step()
            if per_step:
                scheduler.step()
        if scheduler is not None and not per_step:
            scheduler.step()
        stop = False
        if validation is not None:
            with torch.no_grad():
                value = float(validation())
            if not math.isfinite(value):
                stop = True
            elif value < best_value:
                best_value, best_epoch = value, epoch
                best_state = [p.detach().clone() for p in parameters]
            elif config.patience is not None and epoch - best_epoch >= config.patience:
                stop = True
        if on_epoch_end is not None:
            on_epoch_end(LoopState(epoch + 1, optimizer.state_dict(),
                                   None if scheduler is None else scheduler.state_dict()))
        if stop:
            break
    if validation is not None and config.restore_best:
        with torch.no_grad():
            for parameter, best in zip(parameters, best_state, strict=True):
                parameter.copy_(best)
    return TrainingHistory(epoch + 1, best_epoch, best_value, value)
