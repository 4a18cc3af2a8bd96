"""Layer norms of a curvature, and the "paper-like" K-FAC accumulation hypothesis.

Generalized Laplace (Chen et al.) quotes a last-layer K-FAC Frobenius norm of 1.0985e9 on
LeNet-5 / MNIST. Correctly scaled, ``F_l = N E[q q^T] kron E[g g^T]`` is of the order of the
diagonal and EKFAC curvatures. The hypothesis (reproduction notes section 7.6): a library that
sums each Kronecker factor over ``U`` update calls of minibatch means gets ``Q_sum kron G_sum =
U^2 E[q q^T] kron E[g g^T]`` instead, with ``U = label_samples * ceil(N / batch_size)``, and
damps per factor, ``(sqrt(s) Q_sum + sqrt(n) I) kron (sqrt(s) G_sum + sqrt(n) I)``.
"""

from __future__ import annotations

import math

import torch

from bench.curvature.base import Curvature
from bench.curvature.dense import BlockDiagonal
from bench.curvature.diagonal import Diagonal
from bench.curvature.eigen_kronecker import EigenKronecker
from bench.curvature.kronecker import Kronecker


def layer_frobenius_norm(curvature: Curvature, layer: int, layer_sizes: list[int]) -> float:
    """Frobenius norm of ``scale * M`` restricted to one layer's block (the shift excluded);
    ``layer_sizes`` are the parameter counts per layer (``layer=-1``: the last layer)."""
    layer = layer % len(layer_sizes)
    if isinstance(curvature, Kronecker):
        a, g = curvature.factors[layer]
        value = torch.linalg.matrix_norm(a) * torch.linalg.matrix_norm(g)
    elif isinstance(curvature, EigenKronecker):
        value = torch.linalg.matrix_norm(curvature.layers[layer][2].clamp(min=0))
    elif isinstance(curvature, BlockDiagonal):
        value = torch.linalg.matrix_norm(curvature.blocks[layer])
    elif isinstance(curvature, Diagonal):
        start = sum(layer_sizes[:layer])
        value = torch.linalg.vector_norm(curvature.values[start:start + layer_sizes[layer]])
    else:
        raise TypeError(f"no layer blocks in a {type(curvature).__name__}")
    return float(curvature.scale * value)


def paper_like_updates(n_data: int, batch_size: int, label_samples: int) -> int:
    """``U``: one factor update per label sample per minibatch."""
    return label_samples * math.ceil(n_data / batch_size)


def paper_like_frobenius_norm(kfac: Kronecker, n_data: int, batch_size: int,
                              label_samples: int, layer: int = -1) -> float:
    """``|Q_sum|_F |G_sum|_F`` of one layer with factors summed over ``U`` minibatch means:
    ``U^2 |E[qq^T]|_F |E[gg^T]|_F`` (``kfac`` holds ``E[qq^T]`` and ``N E[gg^T]``)."""
    a, g = kfac.factors[layer]
    updates = paper_like_updates(n_data, batch_size, label_samples)
    return float(updates**2 * torch.linalg.matrix_norm(a) * torch.linalg.matrix_norm(g)
                 / n_data)


def paper_like_kfac(kfac: Kronecker, n_data: int, batch_size: int, label_samples: int,
                    temperature: float, prior_precision: float) -> Kronecker:
    """The paper-like posterior precision ``(sqrt(s) Q_sum + sqrt(n) I) kron (sqrt(s) G_sum +
    sqrt(n) I)`` per layer, with ``s = temperature`` and ``n = prior_precision``, as a
    :class:`Kronecker` (scale 1, no shift) that samples exactly."""
    updates = paper_like_updates(n_data, batch_size, label_samples)
    root_s, root_n = temperature**0.5, prior_precision**0.5
    factors = []
    for a, g in kfac.factors:
        eye_a = torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
        eye_g = torch.eye(g.shape[0], dtype=g.dtype, device=g.device)
        factors.append((root_s * updates * a + root_n * eye_a,
                        root_s * updates * g / n_data + root_n * eye_g))
    return Kronecker(tuple(factors), kfac.biases)
