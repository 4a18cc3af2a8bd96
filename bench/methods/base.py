"""The method contract for network regression: ``fit`` on splits, ``predict`` a Predictive.

Every adapter (plugin, la, ssla, assla, vi, mfvi, hmc, deep_ensemble) implements
:class:`RegressionMethod`. Metrics are computed centrally from the returned Predictive,
never inside a method.
"""

from __future__ import annotations

from typing import Any, Protocol

from torch import Tensor

from bench.datasets.regression import RegressionSplits


class RegressionMethod(Protocol):
    """``fit(splits, seed) -> diagnostics`` then ``predict(x) -> Predictive``.

    ``seed`` drives every random draw of the method (initialisation, minibatch order,
    Monte Carlo samples); the same seed on CPU gives the same predictions. Diagnostics are
    plain JSON values (fitted hyperparameters, acceptance rates, epochs run, ...).
    """

    name: str

    def fit(self, splits: RegressionSplits, seed: int) -> dict[str, Any]:
        """Train or condition on ``splits`` (standardised units)."""

    def predict(self, x: Tensor):
        """Predictive over y at inputs ``x`` (``[n, d]``): a :mod:`bench.predictive` object."""
