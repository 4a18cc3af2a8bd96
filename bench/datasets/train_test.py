"""A fixed training set and test set of a small toy problem (float64 tensors)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from bench.datasets.training_set import TrainingSet


@dataclass(frozen=True)
class TrainTest:
    """Inputs ``[n, d]`` and targets ``[n]`` of a training and a test set.

    Regression targets are real values; binary classification targets are 0. / 1. (float, so
    the Bernoulli likelihood takes them as they are).
    """

    name: str
    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor

    @classmethod
    def drawn(cls, name: str, draw: Callable[[int, int], tuple[Any, Any]],
              train: tuple[int, int], test: tuple[int, int]) -> TrainTest:
        """The sets ``draw(seed, n) -> (inputs [n, d], targets [n])`` gives for the training
        ``(seed, n)`` and the test ``(seed, n)`` (the toy sets that do not depend on the job
        seed), as float64 tensors."""
        sets = []
        for seed, n in (train, test):
            x, y = draw(seed, n)
            sets += [torch.as_tensor(x, dtype=torch.float64),
                     torch.as_tensor(y, dtype=torch.float64)]
        return cls(name, *sets)

    @property
    def input_dim(self) -> int:
        """Input dimension d."""
        return int(self.x_train.shape[1])

    def training_set(self) -> TrainingSet:
        """The training part in the form the method contract takes."""
        return TrainingSet(self.x_train, self.y_train, name=self.name)
