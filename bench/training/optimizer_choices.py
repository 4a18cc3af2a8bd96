"""The optimizers, learning-rate schedules and schedule units of
:class:`bench.training.loop.TrainingConfig` by name (``training.optimizer``,
``training.schedule``, ``training.schedule_unit``): each name maps to the function that
builds it from the config, so the loop calls the builder instead of comparing names.

Builders read the config duck-typed (``lr``, ``weight_decay``, ``momentum``, ``nesterov``,
``step_every``, ``step_factor``, ``min_lr``, ``max_epochs``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

schedulers = torch.optim.lr_scheduler


def sgd(parameters: Sequence[Tensor], config: Any) -> torch.optim.Optimizer:
    """SGD with the config's momentum, Nesterov flag and L2 weight decay."""
    return torch.optim.SGD(parameters, lr=config.lr, momentum=config.momentum,
                           nesterov=config.nesterov, weight_decay=config.weight_decay)


def adam(parameters: Sequence[Tensor], config: Any) -> torch.optim.Optimizer:
    """Adam with L2 weight decay added to the gradient."""
    return torch.optim.Adam(parameters, lr=config.lr, weight_decay=config.weight_decay)


def adamw(parameters: Sequence[Tensor], config: Any) -> torch.optim.Optimizer:
    """AdamW (decoupled weight decay)."""
    return torch.optim.AdamW(parameters, lr=config.lr, weight_decay=config.weight_decay)


OPTIMIZER_BUILDERS: dict[str, Callable[[Sequence[Tensor], Any], torch.optim.Optimizer]] = {
    "adam": adam, "adamw": adamw, "sgd": sgd}


@dataclass(frozen=True)
class ScheduleUnit:
    """When the schedule advances: after every optimizer step (``per_step``) or every epoch."""

    per_step: bool

    def units(self, max_epochs: int, steps_per_epoch: int) -> int:
        """The schedule's length in its own units over ``max_epochs`` epochs."""
        return max_epochs * (steps_per_epoch if self.per_step else 1)


SCHEDULE_UNITS: dict[str, ScheduleUnit] = {"epoch": ScheduleUnit(per_step=False),
                                           "step": ScheduleUnit(per_step=True)}


def no_schedule(optimizer: torch.optim.Optimizer, config: Any, length: int) -> None:
    """A constant learning rate: no scheduler."""
    return None


def step_schedule(optimizer: torch.optim.Optimizer, config: Any, length: int):
    """StepLR: the rate times ``step_factor`` every ``step_every`` units."""
    return schedulers.StepLR(optimizer, config.step_every, config.step_factor)


def cosine_schedule(optimizer: torch.optim.Optimizer, config: Any, length: int):
    """Cosine annealing to ``min_lr`` over ``length`` units."""
    return schedulers.CosineAnnealingLR(optimizer, length, eta_min=config.min_lr)


SCHEDULE_BUILDERS: dict[str, Callable[..., Any]] = {
    "none": no_schedule, "step": step_schedule, "cosine": cosine_schedule}
