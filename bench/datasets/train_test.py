"""A fixed training set and test set of a small toy problem (float64 tensors), and the settings
of the GGN thesis's toys, whose sets are drawn once from their own seeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import require_positive


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

    @property
    def input_dim(self) -> int:
        """Input dimension d."""
        return int(self.x_train.shape[1])

    def training_set(self) -> TrainingSet:
        """The training part in the form the method contract takes."""
        return TrainingSet(self.x_train, self.y_train, name=self.name)


@dataclass
class FixedToySets:
    """A toy whose training set (``n_train`` points drawn with ``train_seed``) and test set
    (``n_test`` with ``test_seed``) are fixed, as the GGN thesis's: 150 points with seed 6 and
    1000 with seed 5. A subclass says how one set is drawn (:meth:`draw`).

    The sets do not depend on the job seed (the thesis uses one data set); the job seed
    drives the networks' initialisation and the Monte Carlo draws.
    """

    name: str
    n_train: int = 150
    n_test: int = 1000
    train_seed: int = 6
    test_seed: int = 5

    def __post_init__(self) -> None:
        for key in ("n_train", "n_test"):
            require_positive(f"dataset.{key}", getattr(self, key))

    def draw(self, seed: int, n: int) -> tuple[Any, Any]:
        """``n`` inputs ``[n, d]`` and targets ``[n]`` (arrays or tensors) drawn from ``seed``."""
        raise NotImplementedError

    def splits(self, seed: int | None = None) -> TrainTest:
        """Training set (``train_seed``) and test set (``test_seed``) as float64 tensors.

        ``seed`` is accepted for the datasets' common ``splits(seed)`` and ignored: the
        thesis's sets are fixed by ``train_seed`` and ``test_seed``."""
        sets = []
        for drawn_from, n in ((self.train_seed, self.n_train), (self.test_seed, self.n_test)):
            x, y = self.draw(drawn_from, n)
            sets += [torch.as_tensor(x, dtype=torch.float64),
                     torch.as_tensor(y, dtype=torch.float64)]
        return TrainTest(self.name, *sets)
