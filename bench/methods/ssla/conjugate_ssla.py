"""SSLA and ASSLA for the conjugate models: fit on a problem, predict its grid density.

Both follow :class:`bench.contracts.method.Method`: ``fit(problem, seed)`` takes a
:class:`bench.datasets.conjugate_problems.ConjugateProblem` (model, data and candidate y-grid travel
together) and fits theta-hat; ``predict(x)`` gives the unnormalised log-PPD on the problem's
grid as a :class:`GridDensity`. A 1-D grid is one predictive at ``x`` (one input row, or None
for models without inputs); a 2-D grid ``[N, m]`` holds one grid per row of ``x`` ``[N, q]``.
Neither draws random numbers. ``last`` keeps the :class:`LogPPD` of the last grid evaluated
(its ``parts`` are the notes' anchor quantities).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from bench.datasets.conjugate_problems import ConjugateProblem
from bench.methods.ssla.algorithm import (
    ConjugateRefit,
    LikelihoodIncrement,
    LogPPD,
    assla_log_ppd,
    conjugate_refit,
    likelihood_increment,
    ssla_log_ppd,
)
from bench.predictive.densities import GridDensity


class _FitsThetaHat:
    """Shared fit step: keep the problem, fit theta-hat by the configured objective."""

    fit_objective: str
    fits_on_base: ClassVar[bool] = False

    def fit(self, data: ConjugateProblem, seed: int, base=None) -> dict[str, list[float]]:
        """Keep the problem (model, data, y-grid) and fit theta-hat; returns theta-hat."""
        self.problem = data
        self.theta_hat = data.model.fit(data.data, self.fit_objective)
        return {"theta_hat": self.theta_hat.tolist()}

    def predict(self, x: Tensor | None) -> GridDensity:
        """Approximate predictive at ``x`` as unnormalised log values on the problem's grid."""
        grid = self.problem.y_grid
        if grid.dim() == 1:
            self.last = self._log_ppd(x, grid)
            return GridDensity(grid, self.last.values)
        rows = [self._log_ppd(x_row, y_row) for x_row, y_row in zip(x, grid, strict=True)]
        self.last = rows[-1]
        return GridDensity(grid, torch.stack([row.values for row in rows]))

    def _log_ppd(self, x: Tensor | None, grid: Tensor) -> LogPPD:
        raise NotImplementedError


@dataclass
class SSLAMethod(_FitsThetaHat):
    """Self-Supervised Laplace: a refit per candidate y (or per self-prediction).

    ``refit``: a name of :data:`~bench.methods.ssla.algorithm.CONJUGATE_REFITS` (the config's
    ``candidate`` / ``self_prediction``) or a refit; it holds the refit after construction."""

    name: str = "ssla"
    refit: str | ConjugateRefit = "candidate"
    fit_objective: str = "mle"
    curvature_includes_prior: bool = False
    last: LogPPD | None = field(default=None, repr=False, init=False)

    def __post_init__(self) -> None:
        self.refit = conjugate_refit(self.refit)

    def _log_ppd(self, x: Tensor | None, grid: Tensor) -> LogPPD:
        problem = self.problem
        return ssla_log_ppd(
            problem.model, problem.data, x, grid, objective=self.fit_objective,
            curvature_includes_prior=self.curvature_includes_prior, refit=self.refit,
            theta_hat=self.theta_hat,
        )


@dataclass
class ASSLAMethod(_FitsThetaHat):
    """Approximate SSLA: no refit, likelihood and curvature increments at theta-hat.

    ``increment``: a name of :data:`~bench.methods.ssla.algorithm.LIKELIHOOD_INCREMENTS` (the
    config's ``aggregate`` / ``direct``) or an increment; it holds the increment after
    construction."""

    name: str = "assla"
    increment: str | LikelihoodIncrement = "aggregate"
    fit_objective: str = "mle"
    curvature_includes_prior: bool = False
    last: LogPPD | None = field(default=None, repr=False, init=False)

    def __post_init__(self) -> None:
        self.increment = likelihood_increment(self.increment)

    def _log_ppd(self, x: Tensor | None, grid: Tensor) -> LogPPD:
        problem = self.problem
        return assla_log_ppd(
            problem.model, problem.data, x, grid, objective=self.fit_objective,
            curvature_includes_prior=self.curvature_includes_prior, increment=self.increment,
            theta_hat=self.theta_hat,
        )
