"""Bayesian linear regression on fixed Gaussian RBF features, its noise variance and prior
precision set by evidence maximisation (SSLA Tables 5 and 6).

The model is y = Phi(x) w + eps with fixed Gaussian RBF features Phi, eps ~ N(0, sigma^2) and
w ~ N(0, tau^-1 I).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import require_positive


@dataclass(frozen=True)
class RBFFeatures:
    """Gaussian bumps exp(-(x - c)^2 / (2 l^2)) at fixed centres ``c``, one column each."""

    centres: Tensor
    lengthscale: float

    @classmethod
    def on_grid(cls, low: float, high: float, n_centres: int, lengthscale: float) -> RBFFeatures:
        """``n_centres`` equispaced centres on [low, high] (float64)."""
        require_positive("task.n_centres", n_centres)
        require_positive("task.lengthscale", lengthscale)
        centres = torch.linspace(low, high, int(n_centres), dtype=torch.float64)
        return cls(centres, float(lengthscale))

    def __call__(self, x: Tensor) -> Tensor:
        """Design matrix ``(len(x), n_centres)`` in float64."""
        scaled = (x.double().unsqueeze(-1) - self.centres) / self.lengthscale
        return torch.exp(-0.5 * scaled**2)


@dataclass(frozen=True)
class EvidenceFit:
    """Evidence-maximising noise variance and prior precision, and how they were reached."""

    noise_variance: float
    prior_precision: float
    effective_parameters: float
    iterations: int
    converged: bool


def evidence_fit(design: Tensor, y: Tensor, max_iter: int = 200,
                 tol: float = 1e-10) -> EvidenceFit:
    """MacKay's fixed-point updates of the closed-form evidence of Bayesian linear regression.

    With beta = 1 / sigma^2 and alpha = tau: gamma = sum_i beta l_i / (beta l_i + alpha) over
    the eigenvalues l_i of Phi^T Phi, alpha = gamma / |m|^2, 1 / beta = |y - Phi m|^2 / (n -
    gamma), m the posterior mean (Bishop, PRML §3.5.2). Stops when both change by less than
    ``tol`` relatively.
    """
    design, y = design.double(), y.double()
    gram, moment = design.T @ design, design.T @ y
    eigenvalues = torch.linalg.eigvalsh(gram).clamp(min=0.0)
    eye = torch.eye(gram.shape[0], dtype=gram.dtype)
    alpha, beta = 1.0, 1.0 / float(y.var())
    gamma, converged, iterations = 0.0, False, 0
    while not converged and iterations < int(max_iter):
        iterations += 1
        mean = beta * torch.linalg.solve(alpha * eye + beta * gram, moment)
        gamma = float((beta * eigenvalues / (beta * eigenvalues + alpha)).sum())
        new_alpha = gamma / float(mean @ mean)
        new_beta = (y.numel() - gamma) / float(((y - design @ mean) ** 2).sum())
        converged = (abs(new_alpha - alpha) <= tol * new_alpha
                     and abs(new_beta - beta) <= tol * new_beta)
        alpha, beta = new_alpha, new_beta
    return EvidenceFit(1.0 / beta, alpha, gamma, iterations, converged)
