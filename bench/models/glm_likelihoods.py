"""Likelihoods of a single-output network seen as a generalised linear model (GGN thesis,
Table 2.1): per output ``f`` the log density, the residual ``r = d log p / d f``, the Hessian
``Lambda = -d^2 log p / d f^2`` (the GGN's output weight) and the inverse link (the mean).

* Gaussian ``y ~ N(f, sigma^2)``: ``r = (y - f) / sigma^2``, ``Lambda = 1 / sigma^2``;
* Bernoulli with logit ``f``: ``r = y - s(f)``, ``Lambda = s(f) (1 - s(f))``, ``s`` the sigmoid.

``noise_variance`` may be a tensor broadcasting against ``f`` (one sigma^2 per network of a
batched grid, shape ``[B, 1]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from bench.harness.errors import require_choice, require_positive

LIKELIHOOD_NAMES = ("gaussian", "bernoulli")


@dataclass(frozen=True)
class GaussianLikelihood:
    """``y ~ N(f, noise_variance)``."""

    noise_variance: float | Tensor = 1.0
    name: str = "gaussian"

    def log_prob(self, f: Tensor, y: Tensor) -> Tensor:
        """``log N(y | f, sigma^2)`` elementwise."""
        variance = torch.as_tensor(self.noise_variance, dtype=f.dtype)
        return -0.5 * torch.log(2 * math.pi * variance) - (y - f) ** 2 / (2 * variance)

    def residual(self, f: Tensor, y: Tensor) -> Tensor:
        """``(y - f) / sigma^2``."""
        return (y - f) / self.noise_variance

    def hessian(self, f: Tensor) -> Tensor:
        """``1 / sigma^2`` in the shape of ``f``."""
        return torch.ones_like(f) / self.noise_variance

    def mean(self, f: Tensor) -> Tensor:
        """The identity link's inverse: ``f``."""
        return f


@dataclass(frozen=True)
class BernoulliLikelihood:
    """``y ~ Bernoulli(s(f))`` with labels 0 / 1."""

    name: str = "bernoulli"

    def log_prob(self, f: Tensor, y: Tensor) -> Tensor:
        """``y f - log(1 + e^f)`` elementwise (stable softplus)."""
        return y * f - F.softplus(f)

    def residual(self, f: Tensor, y: Tensor) -> Tensor:
        """``y - s(f)``."""
        return y - torch.sigmoid(f)

    def hessian(self, f: Tensor) -> Tensor:
        """``s(f) (1 - s(f))``."""
        s = torch.sigmoid(f)
        return s * (1 - s)

    def mean(self, f: Tensor) -> Tensor:
        """``s(f)``."""
        return torch.sigmoid(f)


Likelihood = GaussianLikelihood | BernoulliLikelihood


def make_likelihood(name: str, noise_variance: float | None = None,
                    key: str = "method.likelihood") -> Likelihood:
    """The likelihood ``name`` names (``noise_variance`` for the Gaussian, checked positive)."""
    require_choice(key, name, LIKELIHOOD_NAMES)
    if name == "bernoulli":
        return BernoulliLikelihood()
    require_positive("method.noise_variance", noise_variance)
    return GaussianLikelihood(float(noise_variance))
