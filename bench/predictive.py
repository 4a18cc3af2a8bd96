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
