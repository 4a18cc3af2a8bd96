"""The deterministic plug-in predictive of an already-trained network: N(f(x), sigma^2)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from bench.datasets.regression import RegressionSplits
from bench.harness.errors import require_positive
from bench.predictive.densities import Gaussian


@dataclass
class PluginMethod:
    """Gaussian(f(x), sigma^2) around a trained network ``f`` set as ``network`` before fit.

    ``network`` maps ``[n, d]`` inputs to ``[n]`` or ``[n, k]`` outputs (the first column is
    the mean). ``noise_variance`` None means sigma^2 is estimated in ``fit`` as the mean
    squared training residual.
    """

    name: str = "plugin"
    noise_variance: float | None = None
    network: Callable[[Tensor], Tensor] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_network(cls, network: Callable[[Tensor], Tensor],
                     noise_variance: float | None = None) -> PluginMethod:
        """A plug-in method around ``network`` with a fixed or (None) estimated noise."""
        return cls(noise_variance=noise_variance, network=network)

    def fit(self, splits: RegressionSplits, seed: int) -> dict[str, Any]:
        """Fix sigma^2 (estimated from training residuals if not given); draws nothing."""
        if self.network is None:
            raise ValueError("PluginMethod.network must be set to a trained network before fit")
        if self.noise_variance is None:
            residual = self._mean(splits.x_train) - splits.y_train.reshape(-1)
            self.fitted_noise_variance = float((residual.double() ** 2).mean())
        else:
            self.fitted_noise_variance = float(
                require_positive("method.noise_variance", self.noise_variance))
        return {"noise_variance": self.fitted_noise_variance,
                "noise_variance_estimated": self.noise_variance is None}

    def _mean(self, x: Tensor) -> Tensor:
        """The network's (first) output per point, ``[n]``."""
        with torch.no_grad():
            out = self.network(x)
        return out.reshape(len(x), -1)[:, 0]

    def predict(self, x: Tensor) -> Gaussian:
        """N(f(x), sigma^2) with the sigma^2 fixed by ``fit``."""
        mean = self._mean(x)
        return Gaussian(mean=mean, variance=torch.full_like(mean, self.fitted_noise_variance))
