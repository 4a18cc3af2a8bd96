"""The plug-in predictive of a Laplace-family task's base network."""

from __future__ import annotations

from dataclasses import dataclass

from bench.datasets.regression import RegressionSplits
from bench.methods.baselines.plugin import PluginMethod
from bench.training.regression_network import TrainedNetwork


@dataclass
class BasePluginMethod:
    """``N(f(x; theta-hat), sigma^2)`` with sigma^2 the mean squared training residual."""

    name: str = "plugin"

    def fit(self, splits: RegressionSplits, seed: int, base: TrainedNetwork) -> dict:
        """Wrap the trained base network in :class:`PluginMethod`."""
        self.plugin = PluginMethod.from_network(base.predict)
        return self.plugin.fit(splits, seed)

    def predict(self, x):
        """Gaussian plug-in predictive."""
        return self.plugin.predict(x)
