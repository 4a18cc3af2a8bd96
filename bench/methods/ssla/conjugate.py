"""SSLA and ASSLA method adapters: fit on a problem's data, predict a grid density."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from bench.methods.ssla.algorithm import LogPPD, assla_log_ppd, ssla_log_ppd
from bench.models.parametric import Data
from bench.predictive.densities import GridDensity


class _FitsThetaHat:
    """Shared fit step: remember model and data, fit theta-hat by the configured objective."""

    fit_objective: str

    def fit(self, model, data: Data, rng=None) -> dict[str, float]:
        """Keep the model and data and fit theta-hat; returns diagnostics."""
        self.model, self.data = model, data
        self.theta_hat = model.fit(data, self.fit_objective)
        return {"theta_hat": self.theta_hat.tolist()}


@dataclass
class SSLAMethod(_FitsThetaHat):
    """Self-Supervised Laplace: a refit per candidate y (or per self-prediction)."""

    name: str = "ssla"
    refit: str = "candidate"
    fit_objective: str = "mle"
    curvature_includes_prior: bool = False
    last: LogPPD | None = field(default=None, repr=False)

    def predict(self, x_new: Tensor | None, y_grid: Tensor) -> GridDensity:
        """Approximate predictive at ``x_new`` as unnormalised log values on ``y_grid``."""
        self.last = ssla_log_ppd(
            self.model, self.data, x_new, y_grid, objective=self.fit_objective,
            curvature_includes_prior=self.curvature_includes_prior, refit=self.refit,
            theta_hat=self.theta_hat,
        )
        return GridDensity(y_grid, self.last.values)


@dataclass
class ASSLAMethod(_FitsThetaHat):
    """Approximate SSLA: no refit, likelihood and curvature increments at theta-hat."""

    name: str = "assla"
    increment: str = "aggregate"
    fit_objective: str = "mle"
    curvature_includes_prior: bool = False
    last: LogPPD | None = field(default=None, repr=False)

    def predict(self, x_new: Tensor | None, y_grid: Tensor) -> GridDensity:
        """Approximate predictive at ``x_new`` as unnormalised log values on ``y_grid``."""
        self.last = assla_log_ppd(
            self.model, self.data, x_new, y_grid, objective=self.fit_objective,
            curvature_includes_prior=self.curvature_includes_prior, increment=self.increment,
            theta_hat=self.theta_hat,
        )
        return GridDensity(y_grid, self.last.values)
