"""Standardised regression splits: the one data object every network method reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor


@dataclass
class RegressionSplits:
    """Train/val/test tensors in standardised units (x: ``[n, d]``, y: ``[n, 1]``, float32).

    ``datamodule`` is the Lightning datamodule the tensors came from when a library method
    (Lightning-UQ-Box's VI baselines) needs it; ``y_scale`` is the training std of the raw
    target, so metrics can be reported in either unit; ``info`` says how the data was made.
    """

    x_train: Tensor
    y_train: Tensor
    x_val: Tensor
    y_val: Tensor
    x_test: Tensor
    y_test: Tensor
    datamodule: Any = None
    y_scale: float = 1.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_features(self) -> int:
        """Input dimension d."""
        return int(self.x_train.shape[1])
