"""Layer norms of a curvature, and how a curvature is accumulated and tempered.

Generalized Laplace (Chen et al.) quotes a last-layer K-FAC Frobenius norm of 1.0985e9 on
LeNet-5 / MNIST. Correctly scaled, ``F_l = N E[q q^T] kron E[g g^T]`` is of the order of the
diagonal and EKFAC curvatures. The hypothesis of reproduction notes section 7.6 is that the
paper accumulated its curvatures the way the DLR "curvature" library does: one update per
label sample per minibatch (``U = label_samples * ceil(N / batch_size)`` updates), each a
minibatch mean of the model's per-example quantities, summed over the updates. Two
accumulations are therefore selectable (:data:`ACCUMULATIONS`, ``method.accumulation``):

* ``exact`` (:class:`ExactAccumulation`): the curvature as :mod:`bench.curvature` computes it,
  summed over the training set; the posterior precision is ``T F + delta I``;
* ``paper-like`` (:class:`LibraryAccumulation`): the library's sums, expressed through our
  curvature (in expectation over the sampled labels, whose per-example gradients have mean
  zero, so the cross terms of a minibatch mean vanish):

  - K-FAC: each factor is a sum of ``U`` minibatch means, ``Q_sum = U E[q q^T]`` and
    ``G_sum = U E[g g^T]`` (per weight-sharing position for a convolution), damped per
    factor: ``(sqrt(T) Q_sum + sqrt(delta) I) kron (sqrt(T) G_sum + sqrt(delta) I)``;
  - Diag (and B-Diag): the squared minibatch-mean gradient times the batch size, summed:
    ``(S / B) F``, precision ``T (S / B) F + delta I``;
  - EKFAC: the squared rotated minibatch-mean gradient without the batch-size factor,
    summed: ``(S / B^2) F``, precision ``T (S / B^2) F + delta I``.

  ``S`` is ``label_samples`` and ``B`` ``batch_size``, the minibatches being equal (``B``
  divides ``N``, as 32 divides MNIST's 60,000).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch
from torch import Tensor, nn

from bench.curvature.base import Curvature
from bench.curvature.dense import BlockDiagonal
from bench.curvature.diagonal import Diagonal
from bench.curvature.eigen_kronecker import EigenKronecker
from bench.curvature.kronecker import Kronecker
from bench.curvature.linalg import symmetric_eigh
from bench.curvature.module_curvature import curvature_layers
from bench.harness.errors import require_choice, require_positive

# The precision of the posterior at (temperature, prior precision).
PrecisionAt = Callable[[float, float], Curvature]


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


def precision_eigenvalues(precision: Curvature) -> Tensor:
    """All eigenvalues ``[q]`` of ``scale * M + shift * I`` (in no particular order) for the
    structures a tempered posterior is sampled from: Diag, K-FAC / EKFAC in an eigenbasis,
    and dense layer blocks."""
    if isinstance(precision, Diagonal):
        return precision.diagonal()
    if isinstance(precision, EigenKronecker):
        return torch.cat([(precision.scale * s.clamp(min=0) + precision.shift).reshape(-1)
                          for _, _, s in precision.layers])
    if isinstance(precision, Kronecker):
        return precision_eigenvalues(EigenKronecker.from_kronecker(precision))
    if isinstance(precision, BlockDiagonal):
        covered = sum(len(i) for i in precision.index)
        parts = [precision.scale * torch.linalg.eigvalsh(b) + precision.shift
                 for b in precision.blocks]
        rest = parts[0].new_full((precision.n_params - covered,), precision.shift)
        return torch.cat([*parts, rest])
    raise TypeError(f"no eigenvalues of a {type(precision).__name__}")


def paper_like_updates(n_data: int, batch_size: int, label_samples: int) -> int:
    """``U``: one factor update per label sample per minibatch."""
    return label_samples * math.ceil(n_data / batch_size)


def paper_like_factors(kfac: Kronecker, n_data: int, batch_size: int, label_samples: int,
                       positions: tuple[int, ...] | None = None
                       ) -> list[tuple[Tensor, Tensor]]:
    """Per layer ``(Q_sum, G_sum)``: K-FAC's factors summed over ``U`` minibatch means.

    ``kfac`` holds ``A = E[q q^T]`` (mean over data and weight-sharing positions) and ``G`` the
    sum of ``g g^T`` over data and positions; ``positions`` are the weight-sharing positions
    per layer (None: one each, as for Linear layers), so ``E[g g^T] = G / (N positions)``."""
    updates = paper_like_updates(n_data, batch_size, label_samples)
    positions = positions or (1,) * len(kfac.factors)
    if len(positions) != len(kfac.factors):
        raise ValueError(f"{len(positions)} position counts for {len(kfac.factors)} layers")
    return [(updates * a, updates * g / (n_data * p))
            for (a, g), p in zip(kfac.factors, positions, strict=True)]


def paper_like_frobenius_norm(kfac: Kronecker, n_data: int, batch_size: int,
                              label_samples: int, layer: int = -1,
                              positions: tuple[int, ...] | None = None) -> float:
    """``|Q_sum|_F |G_sum|_F`` of one layer (:func:`paper_like_factors`); for a layer without
    weight sharing ``U^2 |E[qq^T]|_F |E[gg^T]|_F``, ``U^2 / N`` times the exact norm."""
    q_sum, g_sum = paper_like_factors(kfac, n_data, batch_size, label_samples,
                                      positions)[layer]
    return float(kfac.scale * torch.linalg.matrix_norm(q_sum) * torch.linalg.matrix_norm(g_sum))


def paper_like_kfac(kfac: Kronecker, n_data: int, batch_size: int, label_samples: int,
                    temperature: float, prior_precision: float,
                    positions: tuple[int, ...] | None = None) -> Kronecker:
    """The paper-like posterior precision ``(sqrt(s) Q_sum + sqrt(n) I) kron (sqrt(s) G_sum +
    sqrt(n) I)`` per layer, with ``s = temperature`` times the curvature's own scale and
    ``n = prior_precision``, as a
    :class:`Kronecker` (scale 1, no shift) that samples exactly (the dense reference of
    :class:`LibraryAccumulation`'s eigenbasis form)."""
    root_s, root_n = (kfac.scale * temperature) ** 0.5, prior_precision**0.5
    factors = []
    for q_sum, g_sum in paper_like_factors(kfac, n_data, batch_size, label_samples, positions):
        eye_q = torch.eye(q_sum.shape[0], dtype=q_sum.dtype, device=q_sum.device)
        eye_g = torch.eye(g_sum.shape[0], dtype=g_sum.dtype, device=g_sum.device)
        factors.append((root_s * q_sum + root_n * eye_q, root_s * g_sum + root_n * eye_g))
    return Kronecker(tuple(factors), kfac.biases)


def weight_sharing_positions(model: nn.Module, x: Tensor) -> tuple[int, ...]:
    """Per curvature layer of ``model``, the output positions that share its weights for one
    input (``x`` a batch of one or more inputs): ``H * W`` of a Conv2d's output, 1 for a
    Linear layer applied once per input."""
    layers = curvature_layers(model)
    shapes: dict[str, torch.Size] = {}
    hooks = [lay.module.register_forward_hook(
        lambda _module, _args, out, name=lay.name: shapes.__setitem__(name, out.shape))
        for lay in layers]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    counts = []
    for lay in layers:
        shape = shapes[lay.name]
        if isinstance(lay.module, nn.Conv2d):
            counts.append(int(shape[-2] * shape[-1]))
        else:
            counts.append(int(math.prod(shape[1:-1])))
    return tuple(counts)


class Accumulation(Protocol):
    """How a fitted curvature becomes the posterior precision at each temperature, and what
    its layer norms are under this accumulation."""

    name: ClassVar[str]

    def precision_at(self, curvature: Curvature) -> PrecisionAt:
        """``(temperature, prior_precision) -> precision`` for ``curvature`` (decomposed once
        where that makes every temperature cheap)."""

    def layer_norm(self, curvature: Curvature, layer: int, layer_sizes: list[int]) -> float:
        """The Frobenius norm of one layer's curvature block under this accumulation."""


def tempered(curvature: Curvature) -> PrecisionAt:
    """``T F + delta I`` of ``curvature`` (K-FAC in its eigenbasis, decomposed once, so that
    tempering is element-wise)."""
    form = EigenKronecker.from_kronecker(curvature) if isinstance(curvature, Kronecker) \
        else curvature
    return lambda temperature, prior_precision: form.scaled(temperature, prior_precision)


@dataclass(frozen=True)
class ExactAccumulation:
    """The curvature as computed, summed over the training set (correctly scaled)."""

    name: ClassVar[str] = "exact"

    def precision_at(self, curvature: Curvature) -> PrecisionAt:
        """``T F + delta I``."""
        return tempered(curvature)

    def layer_norm(self, curvature: Curvature, layer: int, layer_sizes: list[int]) -> float:
        """:func:`layer_frobenius_norm`."""
        return layer_frobenius_norm(curvature, layer, layer_sizes)


@dataclass(frozen=True)
class LibraryAccumulation:
    """The "paper-like" accumulation of the DLR curvature library (module docstring):
    ``n_data`` training inputs in minibatches of ``batch_size``, ``label_samples`` labels
    drawn per minibatch, ``positions`` the weight-sharing positions per layer (None: one)."""

    n_data: int
    batch_size: int = 32
    label_samples: int = 30
    positions: tuple[int, ...] | None = None
    name: ClassVar[str] = "paper-like"

    def __post_init__(self) -> None:
        require_positive("n_data", self.n_data)
        require_positive("method.library_batch_size", self.batch_size)
        require_positive("method.library_label_samples", self.label_samples)

    @property
    def updates(self) -> int:
        """``U``, the number of update calls."""
        return paper_like_updates(self.n_data, self.batch_size, self.label_samples)

    def rescaling(self, curvature: Curvature) -> float:
        """The factor the library's sum puts on a diagonal (``S / B``), block-diagonal
        (``S / B``) or EKFAC (``S / B^2``) curvature; K-FAC has no single factor."""
        if isinstance(curvature, Diagonal | BlockDiagonal):
            return self.label_samples / self.batch_size
        if isinstance(curvature, EigenKronecker):
            return self.label_samples / self.batch_size**2
        raise TypeError(f"no single rescaling of a {type(curvature).__name__}")

    def factors(self, kfac: Kronecker) -> list[tuple[Tensor, Tensor]]:
        """K-FAC's ``(Q_sum, G_sum)`` per layer (:func:`paper_like_factors`)."""
        return paper_like_factors(kfac, self.n_data, self.batch_size, self.label_samples,
                                  self.positions)

    def precision_at(self, curvature: Curvature) -> PrecisionAt:
        """K-FAC: per-factor damping in the factors' eigenbases (decomposed once); the other
        structures: ``T c F + delta I`` with ``c`` the :meth:`rescaling`."""
        if not isinstance(curvature, Kronecker):
            return tempered(curvature.scaled(self.rescaling(curvature)))
        eigen = [(symmetric_eigh(q), symmetric_eigh(g)) for q, g in self.factors(curvature)]
        scale, biases = curvature.scale, curvature.biases

        def precision(temperature: float, prior_precision: float) -> EigenKronecker:
            root_s, root_n = (scale * temperature) ** 0.5, prior_precision**0.5
            layers = tuple((u_q, u_g, torch.outer(root_s * l_g.clamp(min=0) + root_n,
                                                   root_s * l_q.clamp(min=0) + root_n))
                           for (l_q, u_q), (l_g, u_g) in eigen)
            return EigenKronecker(layers, biases)

        return precision

    def layer_norm(self, curvature: Curvature, layer: int, layer_sizes: list[int]) -> float:
        """``|Q_sum|_F |G_sum|_F`` for K-FAC, the rescaled exact norm otherwise."""
        if isinstance(curvature, Kronecker):
            q_sum, g_sum = self.factors(curvature)[layer]
            return float(curvature.scale * torch.linalg.matrix_norm(q_sum)
                         * torch.linalg.matrix_norm(g_sum))
        return self.rescaling(curvature) * layer_frobenius_norm(curvature, layer, layer_sizes)


# Name (``method.accumulation``) -> the accumulation, built from the library settings.
ACCUMULATIONS: dict[str, Callable[..., Accumulation]] = {
    ExactAccumulation.name: lambda **_library: ExactAccumulation(),
    LibraryAccumulation.name: LibraryAccumulation,
}


def make_accumulation(name: str, *, n_data: int, batch_size: int = 32, label_samples: int = 30,
                      positions: tuple[int, ...] | None = None) -> Accumulation:
    """The accumulation ``name`` (:data:`ACCUMULATIONS`; another name is a one-line
    ConfigError naming the valid ones); the library settings serve ``paper-like`` only."""
    require_choice("method.accumulation", name, ACCUMULATIONS)
    return ACCUMULATIONS[name](n_data=n_data, batch_size=batch_size,
                               label_samples=label_samples, positions=positions)
