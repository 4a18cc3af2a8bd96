"""Data generators of the SSLA paper's conjugate experiments (notes §2-§4).

Draws use an explicit generator in float32, in the authors' order, so seed 42 reproduces the
authors' data exactly (theta-hat anchors of the notes); runs in float64 cast the same draws.
Each generator yields :class:`ConjugateProblem` objects: a model, its data, where to predict,
the candidate grid and the exact log predictive there. :class:`PriorModularityData` draws the
design of the prior-modularity tables, whose task builds one problem per prior.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import require_positive
from bench.models.conjugate_models import LinearGaussianModel, NormalMeanModel, PoissonRateModel
from bench.models.parametric import Data


@dataclass
class ConjugateProblem:
    """One panel of a conjugate experiment: the data a conjugate method is fitted on.

    ``y_grid`` is ``[m]`` (one predictive at ``x_new``, a row or None) or ``[N, m]`` (one
    grid per row of ``x_new`` ``[N, q]``); ``exact_log_ppd`` is the reference on that grid
    where the task scores against it (None otherwise).
    """

    label: str
    model: object
    data: Data
    x_new: Tensor | None
    y_grid: Tensor
    exact_log_ppd: Tensor | None = None


def _check_sizes(sizes: list[int]) -> list[int]:
    for n in sizes:
        require_positive("dataset.sizes", n)
    return [int(n) for n in sizes]


def _problem_per_size(model, grid: Tensor, sizes: list[int], draw: Callable[[int], Tensor],
                      dtype: torch.dtype) -> Iterator[ConjugateProblem]:
    """One problem ``n=<n>`` per sample size, its ``n`` observations ``draw(n)`` (taken one
    size after another from the caller's stream) and the exact log-PPD on ``grid``."""
    for n in _check_sizes(sizes):
        data = Data(y=draw(n).to(dtype))
        yield ConjugateProblem(f"n={n}", model, data, None, grid, model.exact_log_ppd(data, grid))


@dataclass
class NormalNormalData:
    """n draws from N(mu, sigma2), taken one size after another from one stream (Figure 1)."""

    name: str
    mu: float
    sigma2: float
    prior_mean: float
    prior_var: float
    sizes: list[int]
    grid_start: float = 0.0
    grid_stop: float = 10.0
    grid_num: int = 50

    def problems(self, rng: torch.Generator, dtype: torch.dtype) -> Iterator[ConjugateProblem]:
        """One problem per sample size, sharing the random stream like the authors' loop."""
        require_positive("dataset.sigma2", self.sigma2)
        require_positive("dataset.prior_var", self.prior_var)
        model = NormalMeanModel(self.sigma2, self.prior_mean, self.prior_var, dtype=dtype)
        grid = torch.linspace(self.grid_start, self.grid_stop, self.grid_num).to(dtype)
        scale = torch.sqrt(torch.tensor(self.sigma2))
        yield from _problem_per_size(
            model, grid, self.sizes,
            lambda n: torch.normal(torch.full((n,), self.mu), scale.expand(n), generator=rng),
            dtype)


@dataclass
class PoissonGammaData:
    """n draws from Poisson(rate), sizes taken from one stream (Figure 3)."""

    name: str
    rate: float
    prior_shape: float
    prior_rate: float
    sizes: list[int]
    grid_max: int = 10

    def problems(self, rng: torch.Generator, dtype: torch.dtype) -> Iterator[ConjugateProblem]:
        """One problem per sample size; the grid is the counts 0..grid_max."""
        require_positive("dataset.rate", self.rate)
        model = PoissonRateModel(self.prior_shape, self.prior_rate, dtype=dtype)
        grid = torch.arange(0, self.grid_max + 1).to(dtype)
        yield from _problem_per_size(
            model, grid, self.sizes,
            lambda n: torch.poisson(torch.full((n,), float(self.rate)), generator=rng), dtype)


def prior_label(mean: list[float], cov_scale: float) -> str:
    """Row label of a BLR prior panel, e.g. ``prior=(0,0),0.2I``."""
    mean_text = ",".join(f"{m:g}" for m in mean)
    return f"prior=({mean_text}),{cov_scale:g}I"


@dataclass
class LinearRegressionData:
    """Bayesian linear regression y = 3 + 5x + eps (notes §4), one problem per prior panel."""

    name: str
    n: int
    sigma2: float
    theta: list[float]
    priors: list[dict]
    x_low: float = -5.0
    x_high: float = 5.0
    grid_sd: float = 3.0
    grid_num: int = 50

    def problems(self, rng: torch.Generator, dtype: torch.dtype) -> Iterator[ConjugateProblem]:
        """Draw all x, then all noise, then x_new; yield one problem per prior."""
        require_positive("dataset.n", self.n)
        require_positive("dataset.sigma2", self.sigma2)
        x = torch.rand(self.n, generator=rng) * (self.x_high - self.x_low) + self.x_low
        noise = torch.randn(self.n, generator=rng) * math.sqrt(self.sigma2)
        x_new = torch.rand(1, generator=rng) * (self.x_high - self.x_low) + self.x_low
        design = torch.stack([torch.ones(self.n), x], dim=1)
        y = design @ torch.tensor(self.theta) + noise
        data = Data(y=y.to(dtype), x=design.to(dtype))
        x_row = torch.cat([torch.ones(1), x_new]).to(dtype)
        for prior in self.priors:
            mean = torch.tensor(prior["mean"], dtype=torch.float64)
            cov = float(prior["cov_scale"]) * torch.eye(len(self.theta), dtype=torch.float64)
            model = LinearGaussianModel(self.sigma2, mean.to(dtype), cov.to(dtype))
            ppd_mean, ppd_var = model.exact_ppd_moments(data, x_row)
            half_width = self.grid_sd * math.sqrt(ppd_var)
            grid = torch.linspace(ppd_mean - half_width, ppd_mean + half_width, self.grid_num)
            grid = grid.to(dtype)
            exact = model.exact_log_ppd(data, x_row, grid)
            label = prior_label(prior["mean"], float(prior["cov_scale"]))
            yield ConjugateProblem(label, model, data, x_row, grid, exact)


@dataclass
class PriorModularityData:
    """1-D regression without intercept, y = slope x + N(0, sigma^2) (notes §9, Tables 7-8).

    ``design_sum_sq`` rescales the drawn x to that sum of squares (None keeps the raw draws);
    ``prior_vars`` are the N(0, tau^2) priors the task compares, ``x_test`` where it predicts.
    """

    name: str
    n: int
    sigma: float
    slope: float
    x_test: float
    prior_vars: list[float]
    design_sum_sq: float | None = None

    def __post_init__(self) -> None:
        require_positive("dataset.n", self.n)
        require_positive("dataset.sigma", self.sigma)
        for variance in self.prior_vars:
            require_positive("dataset.prior_vars[*]", variance)

    def design(self, rng: torch.Generator) -> tuple[Tensor, Tensor]:
        """x ~ N(0, 1) rescaled to ``design_sum_sq`` (if set), then y (float64)."""
        n = int(require_positive("dataset.n", self.n))
        x = torch.randn(n, generator=rng, dtype=torch.float64)
        if self.design_sum_sq is not None:
            target = require_positive("dataset.design_sum_sq", self.design_sum_sq)
            x = x * math.sqrt(target / x.pow(2).sum())
        y = self.slope * x + self.sigma * torch.randn(n, generator=rng, dtype=torch.float64)
        return x, y
