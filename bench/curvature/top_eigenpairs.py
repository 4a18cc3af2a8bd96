"""The ``k`` largest eigenpairs of a network's GGN, matrix-free: the low-rank structure
``G ~ U diag(lambda) U^T`` (Laplace Redux section 2, "Low-rank": truncate the
eigendecomposition after the ``k`` largest eigenvalues).

The GGN of the summed cross-entropy, ``G = sum_n J_n^T (diag(p_n) - p_n p_n^T) J_n`` over the
loader's batches, is curvlinops' ``GGNLinearOperator`` (one pass over the data per product);
scipy's Lanczos (``eigsh``, ``which="LA"``) finds its largest eigenpairs from a start vector
drawn from ``generator``, so a fit is reproducible. Eigenvalues at or below ``floor`` (the GGN
is positive semi-definite; Lanczos returns round-off there) are dropped, as laplace-torch drops
its Hessian eigenvalues below its EPS.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from torch import Tensor, nn

EIGENVALUE_FLOOR = 1e-6


def top_ggn_eigenpairs(model: nn.Module, loader: Iterable, k: int,
                       generator: torch.Generator, floor: float = EIGENVALUE_FLOOR,
                       tolerance: float = 1e-6) -> tuple[Tensor, Tensor]:
    """``(eigenvalues [k'], eigenvectors [P, k'])`` of the summed cross-entropy GGN of
    ``model`` (its trainable parameters, ``parameters()`` order) over ``loader`` (an iterable
    of ``(inputs, labels)`` batches), largest first, ``k' <= k`` after dropping those at or
    below ``floor``; in the parameters' dtype."""
    from curvlinops import GGNLinearOperator
    from scipy.sparse.linalg import eigsh

    params = [p for p in model.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)
    if not 0 < k < n_params:
        raise ValueError(f"rank k={k} must be between 1 and the {n_params - 1} the GGN allows")
    operator = GGNLinearOperator(model, nn.CrossEntropyLoss(reduction="sum"), params,
                                 list(loader), check_deterministic=False).to_scipy()
    start = torch.randn(n_params, generator=generator, dtype=torch.float64).numpy()
    values, vectors = eigsh(operator, k=k, which="LA", v0=start.astype(operator.dtype),
                            tol=tolerance)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    keep = values > floor
    dtype = params[0].dtype
    return (torch.as_tensor(values[keep].copy(), dtype=dtype),
            torch.as_tensor(vectors[:, keep].copy(), dtype=dtype))
