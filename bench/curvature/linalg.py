"""Log-determinants of curvature matrices, via Cholesky where the matrix is positive definite."""

from __future__ import annotations

import torch
from torch import Tensor


def logdet_spd(matrix: Tensor) -> Tensor:
    """log|A| of a symmetric positive-definite matrix (batched over leading dimensions).

    Cholesky gives ``2 * sum(log(diag(L)))``; a matrix that is not numerically positive
    definite falls back to ``slogdet`` and yields -inf/NaN for singular or indefinite input,
    which the run wrapper then reports as a failed run instead of a silent number.
    """
    chol, info = torch.linalg.cholesky_ex(matrix)
    if bool((info == 0).all()):
        return 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
    sign, logabs = torch.linalg.slogdet(matrix)
    return torch.where(sign > 0, logabs, torch.full_like(logabs, float("nan")))


def symmetric_eigh(matrix: Tensor) -> tuple[Tensor, Tensor]:
    """``torch.linalg.eigh`` of a symmetric positive semi-definite matrix that does not give up.

    LAPACK's divide-and-conquer solver can fail to converge on low-rank PSD matrices with many
    repeated (zero) eigenvalues, e.g. a K-FAC input factor of 576 x 576 estimated from 40
    images. The plain call is tried first (its result is unchanged wherever it converges);
    on failure the symmetrised matrix is shifted by ``1e-10`` of its largest diagonal entry,
    which separates the repeated eigenvalues, and the shift is taken off the eigenvalues.
    """
    try:
        return torch.linalg.eigh(matrix)
    except torch.linalg.LinAlgError:
        symmetric = (matrix + matrix.mT) / 2
        shift = 1e-10 * symmetric.diagonal(dim1=-2, dim2=-1).abs().amax().clamp_min(1e-30)
        eye = torch.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
        values, vectors = torch.linalg.eigh(symmetric + shift * eye)
        return values - shift, vectors


def logdet_shifted(eigenvalues: Tensor, shift: Tensor | float) -> Tensor:
    """``log|A + shift * I| = sum_i log(lambda_i + shift)`` from the eigenvalues ``[P]`` of a
    symmetric ``A`` (differentiable in ``shift``): one eigendecomposition serves every shift,
    where a Cholesky per shift costs ``O(P^3)`` each time. The sum is taken in float64 (a sum
    of ``P`` logarithms) and returned in the eigenvalues' dtype."""
    if not isinstance(shift, Tensor):
        shift = torch.tensor(float(shift), dtype=torch.float64, device=eigenvalues.device)
    return torch.log(eigenvalues.double() + shift.double()).sum().to(eigenvalues.dtype)
