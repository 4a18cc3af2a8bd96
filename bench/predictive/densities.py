"""Predictive distributions: one object family every method returns and every metric reads."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Gaussian:
    """Independent Gaussian predictive per test point: mean and variance tensors."""

    mean: Tensor
    variance: Tensor

    @property
    def stddev(self) -> Tensor:
        """Standard deviation."""
        return self.variance.sqrt()

    def log_prob(self, y: Tensor) -> Tensor:
        """Log density of ``y`` under each point's Gaussian."""
        return torch.distributions.Normal(self.mean, self.stddev).log_prob(y)

    def cdf(self, y: Tensor) -> Tensor:
        """Cumulative distribution at ``y``."""
        return torch.distributions.Normal(self.mean, self.stddev).cdf(y)

    def quantile(self, q: float) -> Tensor:
        """The ``q``-quantile per point."""
        return self.mean + self.stddev * math.sqrt(2) * torch.erfinv(torch.tensor(2 * q - 1.0))


@dataclass
class GridDensity:
    """A predictive known by unnormalised log values on a grid of candidate y.

    Normalisation is by the sum over the grid (as the SSLA paper's figures and "entropy"
    scores do), computed in float64 with log-sum-exp so large log values do not overflow.
    """

    grid: Tensor
    log_values: Tensor

    def log_weights(self) -> Tensor:
        """Log of the grid weights normalised to sum to one (float64)."""
        return torch.log_softmax(self.log_values.double(), dim=-1)

    def weights(self) -> Tensor:
        """Grid weights normalised to sum to one (float64)."""
        return self.log_weights().exp()

    @property
    def mean(self) -> Tensor:
        """Mean of the normalised grid distribution."""
        return (self.weights() * self.grid.double()).sum(-1)

    @property
    def variance(self) -> Tensor:
        """Variance of the normalised grid distribution."""
        centred = self.grid.double() - self.mean.unsqueeze(-1)
        return (self.weights() * centred**2).sum(-1)

    def log_prob(self, y: Tensor) -> Tensor:
        """Normalised log weight of the grid point nearest to ``y``."""
        index = torch.argmin((self.grid.double() - y.double().unsqueeze(-1)).abs(), dim=-1)
        return self.log_weights().gather(-1, index.unsqueeze(-1)).squeeze(-1)

    def cdf(self, y: Tensor) -> Tensor:
        """Total weight of grid points at or below ``y``."""
        below = self.grid.double() <= y.double().unsqueeze(-1)
        return (self.weights() * below).sum(-1)

    def quantile(self, q: float) -> Tensor:
        """Smallest grid point whose cumulative weight reaches ``q``."""
        cumulative = self.weights().cumsum(-1)
        index = torch.searchsorted(cumulative, torch.full_like(cumulative[..., :1], q))
        index = index.clamp(max=self.grid.shape[-1] - 1)
        return self.grid.double().expand_as(cumulative).gather(-1, index).squeeze(-1)


def kde_bandwidth_gaussian(center: Tensor, grid: Tensor, log_values: Tensor) -> Gaussian:
    """The SSLA authors' summary of grid log-PPDs: Gaussian(y-hat, KDE bandwidth^2).

    Their code fits ``scipy.stats.gaussian_kde(grid, weights=softmax(log_values))`` with Scott's
    rule and reports the plug-in prediction ``center`` with standard deviation
    ``sqrt(kde.covariance)``: the kernel bandwidth ``n_eff^(-1/5)`` times the weighted unbiased
    standard deviation, with ``n_eff = 1 / sum(w^2)`` (notes §1). Rows are test points.
    """
    weights = torch.softmax(log_values.double(), dim=-1)
    grid = grid.double()
    mean = (weights * grid).sum(-1, keepdim=True)
    sum_sq = (weights**2).sum(-1)
    variance = (weights * (grid - mean) ** 2).sum(-1) / (1 - sum_sq)
    n_eff = 1 / sum_sq
    return Gaussian(center.double(), variance * n_eff ** (-2 / 5))


@dataclass
class QuadratureDensity:
    """A density known by unnormalised log values on a fine grid, normalised by trapezoid rule.

    Between grid points the log density is interpolated linearly; outside the grid,
    ``log_prob`` uses the moment-matched Gaussian (the grid spans many predictive standard
    deviations, so this only matters for gross outliers). Rows are test points.
    """

    grid: Tensor
    log_values: Tensor

    def __post_init__(self) -> None:
        self.grid = self.grid.double()
        shifted = self.log_values.double() - self.log_values.double().max(-1, keepdim=True).values
        unnormalised = shifted.exp()
        mass = torch.trapezoid(unnormalised, self.grid, dim=-1).unsqueeze(-1)
        self.density = unnormalised / mass
        self.log_density = shifted - mass.log()
        steps = torch.diff(self.grid, dim=-1)
        pieces = 0.5 * (self.density[..., 1:] + self.density[..., :-1]) * steps
        self.cumulative = torch.cat([torch.zeros_like(pieces[..., :1]), pieces.cumsum(-1)], -1)

    @property
    def mean(self) -> Tensor:
        """Mean by quadrature."""
        return torch.trapezoid(self.density * self.grid, self.grid, dim=-1)

    @property
    def variance(self) -> Tensor:
        """Variance by quadrature."""
        centred = self.grid - self.mean.unsqueeze(-1)
        return torch.trapezoid(self.density * centred**2, self.grid, dim=-1)

    def _gaussian(self) -> Gaussian:
        return Gaussian(self.mean, self.variance)

    def log_prob(self, y: Tensor) -> Tensor:
        """Interpolated normalised log density at ``y`` (one value per row)."""
        y = y.double()
        inside = _interp_rows(y, self.grid, self.log_density)
        outside = (y < self.grid[..., 0]) | (y > self.grid[..., -1])
        return torch.where(outside, self._gaussian().log_prob(y), inside)

    def cdf(self, y: Tensor) -> Tensor:
        """Cumulative probability at ``y`` (trapezoid rule, clamped to [0, 1])."""
        return _interp_rows(y.double(), self.grid, self.cumulative).clamp(0, 1)

    def quantile(self, q: float) -> Tensor:
        """The ``q``-quantile per row by inverting the cumulative distribution."""
        target = torch.full_like(self.grid[..., :1], q)
        return _interp_rows(target.squeeze(-1), self.cumulative, self.grid)

    def crps(self, y: Tensor) -> Tensor:
        """CRPS ``int (F(t) - 1[t >= y])^2 dt`` by quadrature on the grid."""
        step = (self.grid >= y.double().unsqueeze(-1)).double()
        return torch.trapezoid((self.cumulative - step) ** 2, self.grid, dim=-1)


def _interp_rows(x: Tensor, xp: Tensor, fp: Tensor) -> Tensor:
    """Row-wise linear interpolation of ``fp(xp)`` at ``x`` (one query per row)."""
    xp = xp.expand_as(fp).contiguous()
    index = torch.searchsorted(xp, x.unsqueeze(-1).contiguous()).clamp(1, xp.shape[-1] - 1)
    x0, x1 = xp.gather(-1, index - 1), xp.gather(-1, index)
    f0, f1 = fp.gather(-1, index - 1), fp.gather(-1, index)
    slope = torch.where(x1 > x0, (x.unsqueeze(-1) - x0) / (x1 - x0), torch.zeros_like(x0))
    return (f0 + slope.clamp(0, 1) * (f1 - f0)).squeeze(-1)
