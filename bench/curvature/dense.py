"""Dense curvatures: one full matrix, or dense blocks on disjoint sets of parameters."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import torch
from torch import Tensor

from bench.curvature.base import Curvature, GGNBackend
from bench.curvature.linalg import logdet_spd


@dataclass(frozen=True)
class Dense(Curvature):
    """``scale * matrix + shift * I`` for a dense q x q matrix, solved through Cholesky."""

    matrix: Tensor
    exact_ggn: ClassVar[bool] = True

    @classmethod
    def from_backend(cls, backend: GGNBackend, x: Tensor, weights: Tensor | None) -> Dense:
        """The full GGN."""
        return cls(backend.ggn_matrix(x, weights))

    @classmethod
    def factored(cls, matrix: Tensor, cholesky: Tensor) -> Dense:
        """``matrix`` whose lower Cholesky factor ``cholesky`` the caller has already computed
        (``cholesky @ cholesky.T == matrix``): solves and draws use it without factorising
        again. A :meth:`scaled` copy factorises its own matrix."""
        dense = cls(matrix)
        dense.__dict__["cholesky"] = cholesky
        return dense

    @property
    def n_params(self) -> int:
        """Number of parameters q."""
        return self.matrix.shape[0]

    def to_dense(self) -> Tensor:
        """The q x q matrix."""
        return self.scale * self.matrix + self.shift * torch.eye(
            self.n_params, dtype=self.matrix.dtype, device=self.matrix.device)

    def diagonal(self) -> Tensor:
        """The diagonal ``[q]``."""
        return self.scale * self.matrix.diagonal() + self.shift

    def diagonal_blocks(self) -> list[Tensor]:
        """One q x q block."""
        return [self.to_dense()]

    def logdet(self) -> Tensor:
        """Through Cholesky when ``shift > 0``, else ``slogdet`` (``-inf`` unless positive)."""
        if self.shift > 0:
            return logdet_spd(self.to_dense())
        sign, value = torch.linalg.slogdet(self.to_dense())
        return value if sign > 0 else torch.tensor(-torch.inf, dtype=value.dtype)

    @cached_property
    def cholesky(self) -> Tensor:
        """The lower Cholesky factor ``L`` of ``H = L L^T`` (computed once)."""
        return torch.linalg.cholesky(self.to_dense())

    def solve(self, b: Tensor) -> Tensor:
        """``H^-1 b`` by two triangular solves."""
        flat = b.reshape(-1, b.shape[-1]).T
        return torch.cholesky_solve(flat, self.cholesky).T.reshape(b.shape)

    def inverse_quadratic_form(self, u: Tensor) -> Tensor:
        """``|L^-1 u|^2`` with ``H = L L^T`` (never negative)."""
        whitened = torch.linalg.solve_triangular(self.cholesky, u.reshape(-1, u.shape[-1]).T,
                                                 upper=False)
        return (whitened**2).sum(0).reshape(u.shape[:-1])

    def inverse_sqrt(self, z: Tensor) -> Tensor:
        """``L^-T z``."""
        flat = z.reshape(-1, z.shape[-1]).T
        return torch.linalg.solve_triangular(self.cholesky.T, flat, upper=True).T.reshape(z.shape)

    def plus(self, other: Dense) -> Dense:
        """The dense sum."""
        return Dense(self.to_dense() + other.to_dense())


@dataclass(frozen=True)
class BlockDiagonal(Curvature):
    """``scale * M + shift * I`` with ``M`` zero except for dense blocks on disjoint parameter
    index sets: ``M[index[k], index[k]] = blocks[k]`` (an index set may list its parameters in
    any order). With ``shift = 0`` the parameters outside every block have zero curvature, and
    solves are Moore-Penrose solves (zero there)."""

    index: tuple[Tensor, ...]
    blocks: tuple[Tensor, ...]
    dimension: int

    @classmethod
    def from_backend(cls, backend: GGNBackend, x: Tensor,
                     weights: Tensor | None) -> BlockDiagonal:
        """The GGN's dense block of each layer (zero between layers)."""
        blocks = backend.layer_blocks(x, weights)
        index, start = [], 0
        for block in blocks:
            index.append(torch.arange(start, start + block.shape[0], device=block.device))
            start += block.shape[0]
        return cls(tuple(index), tuple(blocks), start)

    @classmethod
    def of(cls, matrix: Tensor, index: list[Tensor]) -> BlockDiagonal:
        """The blocks of ``matrix`` on the index sets ``index`` (zero elsewhere)."""
        blocks = tuple(matrix[i.unsqueeze(1), i.unsqueeze(0)] for i in index)
        return cls(tuple(index), blocks, matrix.shape[0])

    @property
    def n_params(self) -> int:
        """Number of parameters q."""
        return self.dimension

    @cached_property
    def _parts(self) -> list[Dense]:
        return [Dense(block, scale=self.scale, shift=self.shift) for block in self.blocks]

    @cached_property
    def _outside(self) -> Tensor:
        covered = torch.zeros(self.dimension, dtype=torch.bool, device=self.blocks[0].device)
        for i in self.index:
            covered[i] = True
        return (~covered).nonzero()[:, 0]

    def to_dense(self) -> Tensor:
        """The q x q matrix."""
        m = self.blocks[0].new_zeros(self.dimension, self.dimension)
        for i, block in zip(self.index, self.blocks, strict=True):
            m[i.unsqueeze(1), i.unsqueeze(0)] = block
        return self.scale * m + self.shift * torch.eye(self.dimension, dtype=m.dtype,
                                                        device=m.device)

    def diagonal(self) -> Tensor:
        """The diagonal ``[q]``."""
        d = self.blocks[0].new_zeros(self.dimension)
        for i, block in zip(self.index, self.blocks, strict=True):
            d[i] = block.diagonal()
        return self.scale * d + self.shift

    def diagonal_blocks(self) -> list[Tensor]:
        """Each block in ascending parameter order, then the parameters outside every block
        as one ``[k, 1, 1]`` (their direct sum is :meth:`to_dense` up to a permutation)."""
        out = []
        for i, part in zip(self.index, self._parts, strict=True):
            order = torch.argsort(i)
            out.append(part.to_dense()[order][:, order])
        outside = self.diagonal()[self._outside]
        return out + ([outside.reshape(-1, 1, 1)] if len(outside) else [])

    def logdet(self) -> Tensor:
        """Sum of the blocks' log-determinants and ``log(shift)`` outside them."""
        total = self.blocks[0].new_zeros(())
        for part in self._parts:
            total = total + part.logdet()
        if len(self._outside):
            total = total + len(self._outside) * torch.log(torch.tensor(self.shift,
                                                                        dtype=total.dtype))
        return total

    def _blockwise(self, method, v: Tensor, outside: Tensor) -> Tensor:
        """``method(part, v_k)`` on each block's entries of ``v``; ``outside`` on the rest."""
        out = outside.clone()
        for i, part in zip(self.index, self._parts, strict=True):
            out[..., i] = method(part, v[..., i])
        return out

    def solve(self, b: Tensor) -> Tensor:
        """Blockwise solves; ``b / shift`` outside the blocks (zero when ``shift = 0``)."""
        return self._blockwise(Dense.solve, b,
                               b / self.shift if self.shift > 0 else torch.zeros_like(b))

    def inverse_quadratic_form(self, u: Tensor) -> Tensor:
        """Sum over blocks of ``|L_k^-1 u_k|^2``, plus ``|u|^2 / shift`` outside them."""
        total = u.new_zeros(u.shape[:-1])
        for i, part in zip(self.index, self._parts, strict=True):
            total = total + part.inverse_quadratic_form(u[..., i])
        if self.shift > 0 and len(self._outside):
            total = total + (u[..., self._outside] ** 2).sum(-1) / self.shift
        return total

    def inverse_sqrt(self, z: Tensor) -> Tensor:
        """Blockwise ``L_k^-T z_k``; ``z / sqrt(shift)`` outside the blocks."""
        return self._blockwise(Dense.inverse_sqrt, z,
                               z / self.shift**0.5 if self.shift > 0 else torch.zeros_like(z))

    def plus(self, other: BlockDiagonal) -> BlockDiagonal:
        """The sum with a block-diagonal curvature on the same index sets."""
        blocks = tuple(self.scale * a + other.scale * b
                       for a, b in zip(self.blocks, other.blocks, strict=True))
        return BlockDiagonal(self.index, blocks, self.dimension, shift=self.shift + other.shift)
