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
