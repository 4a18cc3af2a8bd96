"""A fixed training set and test set of a small toy problem (float64 tensors)."""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def input_dim(self) -> int:
        """Input dimension d."""
        return int(self.x_train.shape[1])

    def training_set(self) -> TrainingSet:
        """The training part in the form the method contract takes."""
        return TrainingSet(self.x_train, self.y_train, name=self.name)
