"""The deterministic plug-in predictive of a trained network: N(f(x), sigma^2).

In the network experiments the network is the task's base network (``fit(..., base=)``, as
for the Laplace-family methods it is compared with); elsewhere any callable set as
``network`` (:meth:`PluginMethod.from_network`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import require_positive
from bench.predictive.densities import Gaussian


@dataclass
class PluginMethod:
    """Gaussian(f(x), sigma^2) around a trained network ``f``: the ``base`` given to ``fit``,
    else the ``network`` set before.

    ``network`` maps ``[n, d]`` inputs to ``[n]`` or ``[n, k]`` outputs (the first column is
    the mean). ``noise_variance`` None means sigma^2 is estimated in ``fit`` as the mean
    squared training residual.
    """

    name: str = "plugin"
    noise_variance: float | None = None
    network: Callable[[Tensor], Tensor] | None = field(default=None, repr=False, compare=False)
    fits_on_base: ClassVar[bool] = True

    @classmethod
    def from_network(cls, network: Callable[[Tensor], Tensor],
                     noise_variance: float | None = None) -> PluginMethod:
        """A plug-in method around ``network`` with a fixed or (None) estimated noise."""
        return cls(noise_variance=noise_variance, network=network)

    def fit(self, data: RegressionSplits, seed: int, base=None) -> dict[str, Any]:
        """Take ``base``'s predictions as ``network`` (if given), fix sigma^2 (estimated from
        the training residuals if not configured); draws nothing."""
        if base is not None:
            self.network = base.predict
        if self.network is None:
            raise ValueError("PluginMethod needs a trained network: fit(..., base=) or "
                             "PluginMethod.from_network")
        if self.noise_variance is None:
            residual = self._mean(data.x_train) - data.y_train.reshape(-1)
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
