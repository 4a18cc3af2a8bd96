"""2-Wasserstein distances between Gaussians (Experiment 1's accuracy metric).

Section 4.1: for each test input, the distance between the full-LLA predictive of eq. (1),
``N(f, sigma0^2 + g^T Omega^-1 g)``, and the same with a surrogate covariance, averaged over
the test set. For univariate Gaussians ``W2^2 = (m1 - m2)^2 + (s1 - s2)^2``; the means agree
here, so ``W2 = |s1 - s2|``. :func:`gaussian_w2` is the general multivariate form, used for
parameter-space distances (Daxberger et al. 2021b) and as a test oracle.
"""

from __future__ import annotations

import torch
from torch import Tensor


def univariate_gaussian_w2(mean1: Tensor, var1: Tensor, mean2: Tensor, var2: Tensor) -> Tensor:
    """Elementwise ``W2(N(mean1, var1), N(mean2, var2))``."""
    return torch.sqrt((mean1 - mean2) ** 2 + (var1.sqrt() - var2.sqrt()) ** 2)


def mean_predictive_w2(full_function_variance: Tensor, surrogate_function_variance: Tensor,
                       noise_variance: float = 1.0) -> float:
    """Mean over test points of ``W2`` between ``N(f, sigma0^2 + v_full)`` and
    ``N(f, sigma0^2 + v_surrogate)`` (same mean ``f``)."""
    zero = torch.zeros_like(full_function_variance)
    distances = univariate_gaussian_w2(zero, noise_variance + full_function_variance,
                                       zero, noise_variance + surrogate_function_variance)
    return float(distances.mean())


def _psd_sqrt(matrix: Tensor) -> Tensor:
    """Symmetric square root of a PSD matrix (negative rounding eigenvalues clamped)."""
    values, vectors = torch.linalg.eigh((matrix + matrix.T) / 2)
    return (vectors * values.clamp(min=0).sqrt()) @ vectors.T


def gaussian_w2(mean1: Tensor, cov1: Tensor, mean2: Tensor, cov2: Tensor) -> Tensor:
    """``W2`` between ``N(mean1, cov1)`` and ``N(mean2, cov2)`` (PSD, possibly singular):
    ``|m1 - m2|^2 + tr(C1 + C2 - 2 (C2^1/2 C1 C2^1/2)^1/2)``."""
    root2 = _psd_sqrt(cov2)
    cross = _psd_sqrt(root2 @ cov1 @ root2)
    squared = ((mean1 - mean2) ** 2).sum() + torch.trace(cov1 + cov2 - 2 * cross)
    return squared.clamp(min=0).sqrt()
