"""EKFAC: per layer, a Kronecker-factored eigenbasis with a full matrix of eigenvalues.

A layer's block is ``(U_G kron U_Q) diag(vec S) (U_G kron U_Q)^T`` acting on the layer matrix
``V = [W | b]`` ``[out, in + 1]`` (``V = W`` ``[out, in]`` for a layer without a bias) row-major
(the layout of :mod:`bench.curvature.kronecker`),
i.e. ``V -> U_G (S * (U_G^T V U_Q)) U_Q^T``. K-FAC is the special case ``S = lambda_G
lambda_Q^T``; EKFAC (George et al. 2018) keeps K-FAC's eigenbases and refits ``S`` as the
second moment of the rotated per-example gradients. Every operation on ``scale * M + shift *
I`` is a rotation and an element-wise operation on ``S``: tempering costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.curvature.base import Curvature, GGNBackend
from bench.curvature.dense import BlockDiagonal
from bench.curvature.kronecker import Kronecker, LayerBiases, layer_matrix, layer_vector
from bench.curvature.linalg import symmetric_eigh


@dataclass(frozen=True)
class EigenKronecker(LayerBiases, Curvature):
    """``scale * blockdiag_l(U_Gl kron U_Ql) diag(S_l) (...)^T + shift * I`` from
    ``layers = ((U_Q, U_G, S), ...)`` (``U_Q`` ``[in + 1, in + 1]`` and ``U_G`` ``[out, out]``
    orthogonal, ``S`` ``[out, in + 1]`` non-negative; ``[in, in]`` and ``[out, in]`` for a
    layer without a bias). ``biases`` says per layer whether it has a bias (None: all do)."""

    layers: tuple[tuple[Tensor, Tensor, Tensor], ...]
    biases: tuple[bool, ...] | None = None

    def __post_init__(self) -> None:
        self._check_bias_flags(len(self.layers))

    @classmethod
    def from_backend(cls, backend: GGNBackend, x: Tensor,
                     weights: Tensor | None) -> EigenKronecker:
        """EKFAC of the GGN: K-FAC's factors from one pass, their eigenbases, and the
        eigenvalues refitted in that basis from a second pass."""
        kfac = Kronecker.from_backend(backend, x, weights)
        bases = [(symmetric_eigh(a)[1], symmetric_eigh(g)[1]) for a, g in kfac.factors]
        eigenvalues = backend.kronecker_eigenvalues(x, weights, bases)
        return cls(tuple((u_a, u_g, s) for (u_a, u_g), s in
                         zip(bases, eigenvalues, strict=True)), kfac.biases)

    @classmethod
    def from_kronecker(cls, kfac: Kronecker) -> EigenKronecker:
        """K-FAC in its eigenbasis: ``S = lambda_G lambda_A^T`` (negative round-off clamped),
        with ``kfac``'s scale and shift."""
        layers = []
        for a, g in kfac.factors:
            (la, qa), (lg, qg) = symmetric_eigh(a), symmetric_eigh(g)
            layers.append((qa, qg, torch.outer(lg.clamp(min=0), la.clamp(min=0))))
        return cls(tuple(layers), kfac.biases, scale=kfac.scale, shift=kfac.shift)

    @property
    def n_params(self) -> int:
        """Number of parameters q."""
        return sum(s.numel() for _, _, s in self.layers)

    def _spectrum(self, s: Tensor) -> Tensor:
        """Eigenvalues of one layer's block ``[out, in (+ 1)]``."""
        return self.scale * s.clamp(min=0) + self.shift

    def _per_layer(self, v: Tensor, transform) -> Tensor:
        """``transform(V, u_q, u_g, spectrum)`` on each layer's matrix of ``v`` ``[..., q]``."""
        out, start = [], 0
        for i, (u_q, u_g, s) in enumerate(self.layers):
            bias = self.has_bias(i)
            fan_out, fan_in = s.shape[0], s.shape[1] - int(bias)
            block = layer_matrix(v[..., start:start + s.numel()], fan_in, fan_out, bias)
            out.append(layer_vector(transform(block, u_q, u_g, self._spectrum(s)), bias))
            start += s.numel()
        return torch.cat(out, dim=-1)

    def _block_dense(self, u_q: Tensor, u_g: Tensor, s: Tensor, has_bias: bool) -> Tensor:
        """One layer's ``scale * M_l + shift * I`` in the parameter order."""
        basis = torch.kron(u_g, u_q)
        block = basis @ (self._spectrum(s).reshape(-1, 1) * basis.T)
        index = torch.arange(s.numel(), device=s.device).reshape(s.shape)
        order = layer_vector(index, has_bias)
        return block[order][:, order]

    def to_dense(self) -> Tensor:
        """The q x q matrix."""
        return torch.block_diag(*self.diagonal_blocks())

    def diagonal(self) -> Tensor:
        """The diagonal ``[q]``: ``(U_G^2 S U_Q^2^T)[o, i]`` per entry of ``V``."""
        return torch.cat([layer_vector(self.scale * (u_g**2 @ s.clamp(min=0) @ (u_q**2).T)
                                       + self.shift, self.has_bias(i))
                          for i, (u_q, u_g, s) in enumerate(self.layers)])

    def diagonal_blocks(self) -> list[Tensor]:
        """One dense block per layer, in parameter order."""
        return [self._block_dense(*layer, self.has_bias(i))
                for i, layer in enumerate(self.layers)]

    def logdet(self) -> Tensor:
        """Sum of the log eigenvalues."""
        return sum(torch.log(self._spectrum(s)).sum() for _, _, s in self.layers)

    def solve(self, b: Tensor) -> Tensor:
        """``H^-1 b`` in the eigenbasis."""
        return self._per_layer(
            b, lambda v, u_q, u_g, lam: u_g @ ((u_g.T @ v @ u_q) / lam) @ u_q.T)

    def inverse_sqrt(self, z: Tensor) -> Tensor:
        """``U diag(lambda)^-1/2 z`` with ``U = U_G kron U_Q``: per layer
        ``U_G (Z / sqrt(lambda)) U_Q^T``."""
        return self._per_layer(z, lambda v, u_q, u_g, lam: u_g @ (v / lam.sqrt()) @ u_q.T)

    def plus(self, other: Curvature) -> BlockDiagonal:
        """The exact sum with a curvature of the same layer layout, as dense layer blocks."""
        index, blocks, start = [], [], 0
        for mine, theirs in zip(self.diagonal_blocks(), other.diagonal_blocks(), strict=True):
            index.append(torch.arange(start, start + mine.shape[0], device=mine.device))
            blocks.append(mine + theirs)
            start += mine.shape[0]
        return BlockDiagonal(tuple(index), tuple(blocks), start)


def eigenbasis_diagonal(block: Tensor, u_a: Tensor, u_g: Tensor, has_bias: bool = True) -> Tensor:
    """The diagonal of a layer's dense block (in the layer's parameter order) in the basis
    ``U_G kron U_A`` of the layer matrix ``V``, as ``[out, in (+1)]``: EKFAC's eigenvalues of
    an exactly known block."""
    fan_out, width = u_g.shape[0], u_a.shape[0]
    order = layer_vector(torch.arange(fan_out * width, device=block.device)
                         .reshape(fan_out, width), has_bias)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order), device=block.device)
    in_matrix_order = block[inverse][:, inverse]
    basis = torch.kron(u_g, u_a)
    return ((basis.T @ in_matrix_order) * basis.T).sum(1).reshape(fan_out, width)
