"""One training loop for networks held as flat parameter tensors: the caller gives the
parameters (leaf tensors, updated in place) and a loss closure over a batch of row indices; the
loop owns the optimizer, the learning-rate schedule, the minibatch order, early stopping and a
progress bar over the epochs (:func:`bench.harness.progress.progress`, silent in CI)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import require_choice
from bench.harness.progress import progress

OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
SCHEDULES = ("none", "step", "cosine")
ALL_ROWS = slice(None)


@dataclass(frozen=True)
class TrainingConfig:
    """How :func:`fit_parameters` trains.

    ``batch_size=None``: full batch, one step per epoch, nothing drawn. Otherwise each epoch
    draws ``torch.randperm(n_rows, generator=...)`` and steps on its consecutive chunks of
    ``batch_size`` rows, even when one chunk holds every row. ``schedule="step"`` multiplies
    the learning rate by ``step_factor`` every ``step_every`` epochs (StepLR); ``"cosine"``
    anneals it to 0 over ``max_epochs``. ``patience``: stop once the validation objective has
    not improved for that many epochs (None: never); ``restore_best``: end with the best
    validation epoch's parameters.
    """

    lr: float
    max_epochs: int
    batch_size: int | None = None
    optimizer: str = "adam"
    weight_decay: float = 0.0
    schedule: str = "none"
    step_every: int = 1
    step_factor: float = 0.1
    patience: int | None = None
    restore_best: bool = True

    def __post_init__(self) -> None:
        require_choice("training.optimizer", self.optimizer, OPTIMIZERS)
        require_choice("training.schedule", self.schedule, SCHEDULES)


@dataclass(frozen=True)
class TrainingHistory:
    """Epochs run, the best validation epoch (-1 if none improved on infinity or there was
    no validation) with its value, and the last epoch's validation value (NaN if none)."""

    epochs: int
    best_epoch: int
    best_validation: float
    last_validation: float


def fit_parameters(parameters: Sequence[Tensor], batch_loss: Callable[[Tensor | slice], Tensor],
                   *, n_rows: int, config: TrainingConfig,
                   generator: torch.Generator | None = None,
                   validation: Callable[[], Tensor | float] | None = None,
                   desc: str = "training") -> TrainingHistory:
    """Minimise ``batch_loss(rows)`` over ``parameters`` by ``config``.

    ``rows`` is a LongTensor of row indices, or :data:`ALL_ROWS` (``slice(None)``) when
    training full batch. ``validation()``, if given, is evaluated without gradients after
    every epoch (after the schedule's step); a non-finite value stops training at once.
    """
    if config.batch_size is not None and generator is None:
        raise ValueError("minibatch training needs an explicit torch.Generator")
    optimizer = OPTIMIZERS[config.optimizer](parameters, lr=config.lr,
                                             weight_decay=config.weight_decay)
    scheduler = None if config.schedule == "none" else _scheduler(optimizer, config)
    best_state = [p.detach().clone() for p in parameters]
    best_value, best_epoch, value, epoch = math.inf, -1, math.nan, -1
    for epoch in progress(range(config.max_epochs), desc=desc, unit="epoch"):
        batches = ([ALL_ROWS] if config.batch_size is None
                   else torch.randperm(n_rows, generator=generator).split(config.batch_size))
        for rows in batches:
            optimizer.zero_grad()
            batch_loss(rows).backward()
            optimizer.step()
        if scheduler is not None:
            scheduler.step()
        if validation is None:
            continue
        with torch.no_grad():
            value = float(validation())
        if not math.isfinite(value):
            break
        if value < best_value:
            best_value, best_epoch = value, epoch
            best_state = [p.detach().clone() for p in parameters]
        elif config.patience is not None and epoch - best_epoch >= config.patience:
            break
    if validation is not None and config.restore_best:
        with torch.no_grad():
            for parameter, best in zip(parameters, best_state, strict=True):
                parameter.copy_(best)
    return TrainingHistory(epoch + 1, best_epoch, best_value, value)


def _scheduler(optimizer: torch.optim.Optimizer, config: TrainingConfig):
    schedulers = torch.optim.lr_scheduler
    if config.schedule == "step":
        return schedulers.StepLR(optimizer, config.step_every, config.step_factor)
    return schedulers.CosineAnnealingLR(optimizer, config.max_epochs)
