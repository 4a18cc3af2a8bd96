"""K-FAC: per layer, the Kronecker product of an input and an output-gradient factor.

A layer's parameters (weight ``[out, in]`` row-major, then bias) are read as the matrix
``V = [W | b]`` ``[out, in + 1]``, or ``V = W`` ``[out, in]`` for a layer without a bias (its
input factor then has no appended 1); the block is ``G kron A`` acting on ``V`` row-major, i.e.
``V -> G V A``. With eigendecompositions of ``A`` and ``G`` every operation on
``scale * (G kron A) + shift * I`` costs factor-sized work.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from bench.curvature.base import Curvature, GGNBackend
from bench.curvature.dense import BlockDiagonal
from bench.curvature.linalg import symmetric_eigh


class LayerBiases:
    """Per-layer bias flags ``biases`` of a layer-wise Kronecker curvature (None: every layer
    has a bias, i.e. a trailing 1 in its input factor or basis)."""

    biases: tuple[bool, ...] | None

    def _check_bias_flags(self, n_layers: int) -> None:
        """ValueError unless there is one flag per layer (or none at all)."""
        if self.biases is not None and len(self.biases) != n_layers:
            raise ValueError(f"{len(self.biases)} bias flags for {n_layers} layers")

    def has_bias(self, layer: int) -> bool:
        """Whether ``layer`` has a bias."""
        return True if self.biases is None else bool(self.biases[layer])


@dataclass(frozen=True)
class Kronecker(LayerBiases, Curvature):
    """``scale * blockdiag_l(G_l kron A_l) + shift * I`` from ``factors = ((A_l, G_l), ...)``
    (``A_l`` ``[in + 1, in + 1]``, ``G_l`` ``[out, out]``), as nngeometry's PMatKFAC.

    ``biases`` says per layer whether it has a bias (``A_l`` ``[in, in]`` without one); None
    means every layer has one."""

    factors: tuple[tuple[Tensor, Tensor], ...]
    biases: tuple[bool, ...] | None = None

    def __post_init__(self) -> None:
        self._check_bias_flags(len(self.factors))

    @classmethod
    def from_backend(cls, backend: GGNBackend, x: Tensor, weights: Tensor | None) -> Kronecker:
        """K-FAC of the GGN (the weights enter the output-gradient factor only)."""
        return cls(tuple(backend.kronecker_factors(x, weights)), backend.biases)

    @property
    def n_params(self) -> int:
        """Number of parameters q."""
        return sum(a.shape[0] * g.shape[0] for a, g in self.factors)

    def _layers(self):
        """Per layer: start offset in the parameter vector, fan_in, fan_out, has_bias."""
        start = 0
        for i, (a, g) in enumerate(self.factors):
            bias = self.has_bias(i)
            yield start, a.shape[0] - int(bias), g.shape[0], bias
            start += a.shape[0] * g.shape[0]

    def to_dense(self) -> Tensor:
        """The q x q matrix."""
        m = torch.block_diag(*[_kfac_block_dense(a, g, self.has_bias(i))
                               for i, (a, g) in enumerate(self.factors)])
        eye = torch.eye(m.shape[0], dtype=m.dtype, device=m.device)
        return self.scale * m + self.shift * eye

    def diagonal(self) -> Tensor:
        """The diagonal ``[q]``: ``G_oo A_ii`` per entry ``(o, i)`` of ``V``."""
        return torch.cat([
            layer_vector(self.scale * torch.outer(g.diagonal(), a.diagonal()) + self.shift,
                         self.has_bias(i)) for i, (a, g) in enumerate(self.factors)])

    def diagonal_blocks(self) -> list[Tensor]:
        """One dense block per layer, in parameter order."""
        blocks = []
        for i, (a, g) in enumerate(self.factors):
            block = self.scale * _kfac_block_dense(a, g, self.has_bias(i))
            blocks.append(block + self.shift * torch.eye(block.shape[0], dtype=block.dtype,
                                                         device=block.device))
        return blocks

    def _spectrum(self, eig_a: Tensor, eig_g: Tensor) -> Tensor:
        """Eigenvalues of one block ``[out, in (+ 1)]`` from its factors' (clamped at 0)."""
        return self.scale * torch.outer(eig_g.clamp(min=0), eig_a.clamp(min=0)) + self.shift

    def logdet(self) -> Tensor:
        """Sum of the log eigenvalues ``scale * lambda_G lambda_A + shift``."""
        total = self.factors[0][0].new_zeros(())
        for a, g in self.factors:
            spectrum = self._spectrum(torch.linalg.eigvalsh(a), torch.linalg.eigvalsh(g))
            total = total + torch.log(spectrum).sum()
        return total

    @cached_property
    def _eigen(self) -> list[tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]]:
        return [(symmetric_eigh(a), symmetric_eigh(g)) for a, g in self.factors]

    def _per_layer(self, v: Tensor, transform) -> Tensor:
        """``transform(V, (la, qa), (lg, qg))`` on each layer's matrix of ``v`` ``[..., q]``."""
        out = []
        for (start, fan_in, fan_out, bias), (eig_a, eig_g) in zip(self._layers(), self._eigen,
                                                                   strict=True):
            size = fan_out * (fan_in + int(bias))
            block = layer_matrix(v[..., start:start + size], fan_in, fan_out, bias)
            out.append(layer_vector(transform(block, eig_a, eig_g), bias))
        return torch.cat(out, dim=-1)

    def solve(self, b: Tensor) -> Tensor:
        """``H^-1 b`` in the factors' eigenbases."""
        def solve_layer(block, eig_a, eig_g):
            (la, qa), (lg, qg) = eig_a, eig_g
            rotated = qg.T @ block @ qa
            return qg @ (rotated / self._spectrum(la, lg)) @ qa.T
        return self._per_layer(b, solve_layer)

    def inverse_sqrt(self, z: Tensor) -> Tensor:
        """``Q diag(lambda)^-1/2 z`` with ``Q = Q_G kron Q_A``."""
        def sqrt_layer(block, eig_a, eig_g):
            (la, qa), (lg, qg) = eig_a, eig_g
            return qg @ (block / self._spectrum(la, lg).sqrt()) @ qa.T
        return self._per_layer(z, sqrt_layer)

    def plus(self, other: Kronecker) -> BlockDiagonal:
        """The exact sum, per layer ``G kron A + G' kron A'`` (no longer a Kronecker product),
        as dense layer blocks in the ``V`` row-major order of the factors."""
        index, blocks = [], []
        for (start, fan_in, fan_out, bias), (a, g), (a_x, g_x) in zip(
                self._layers(), self.factors, other.factors, strict=True):
            size = fan_out * (fan_in + int(bias))
            index.append(start + layer_matrix(torch.arange(size, device=a.device), fan_in,
                                              fan_out, bias).flatten())
            blocks.append(torch.kron(g * self.scale, a) + torch.kron(g_x * other.scale, a_x))
        return BlockDiagonal(tuple(index), tuple(blocks), self.n_params,
                             shift=self.shift + other.shift)


def layer_matrix(v: Tensor, fan_in: int, fan_out: int, has_bias: bool = True) -> Tensor:
    """Layer parameters (weight row-major, then bias) as ``[..., fan_out, fan_in + 1]``, or
    the weight ``[..., fan_out, fan_in]`` for a layer without a bias."""
    weight = v[..., : fan_in * fan_out].reshape(*v.shape[:-1], fan_out, fan_in)
    if not has_bias:
        return weight
    return torch.cat([weight, v[..., fan_in * fan_out:].unsqueeze(-1)], dim=-1)


def layer_vector(m: Tensor, has_bias: bool = True) -> Tensor:
    """Inverse of :func:`layer_matrix`."""
    if not has_bias:
        return m.flatten(-2)
    return torch.cat([m[..., :-1].flatten(-2), m[..., -1]], dim=-1)


def _kfac_block_dense(a: Tensor, g: Tensor, has_bias: bool = True) -> Tensor:
    """The K-FAC block ``G kron A`` permuted into the parameter order."""
    fan_out, width = g.shape[0], a.shape[0]
    full = torch.kron(g, a)
    index = torch.arange(fan_out * width, device=a.device).reshape(fan_out, width)
    order = layer_vector(index, has_bias)
    return full[order][:, order]
