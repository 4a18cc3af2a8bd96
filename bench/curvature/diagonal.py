"""A diagonal curvature: one value per parameter."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.curvature.base import Curvature, GGNBackend


@dataclass(frozen=True)
class Diagonal(Curvature):
    """``scale * diag(values) + shift * I``."""

    values: Tensor

    @classmethod
    def from_backend(cls, backend: GGNBackend, x: Tensor, weights: Tensor | None) -> Diagonal:
        """The GGN's diagonal."""
        return cls(backend.ggn_diagonal(x, weights))

    @property
    def n_params(self) -> int:
        """Number of parameters q."""
        return self.values.shape[0]

    def diagonal(self) -> Tensor:
        """``scale * values + shift``."""
        return self.scale * self.values + self.shift

    def to_dense(self) -> Tensor:
        """The q x q diagonal matrix."""
        return torch.diag(self.diagonal())

    def diagonal_blocks(self) -> list[Tensor]:
        """q 1 x 1 blocks as a single ``[q, 1, 1]``."""
        return [self.diagonal().reshape(-1, 1, 1)]

    def logdet(self) -> Tensor:
        """Sum of the log diagonal."""
        return torch.log(self.diagonal()).sum()

    def solve(self, b: Tensor) -> Tensor:
        """``b / diagonal``."""
        return b / self.diagonal()

    def inverse_quadratic_form(self, u: Tensor) -> Tensor:
        """``sum_j u_j^2 / H_jj`` per row."""
        return (u**2 * (1.0 / self.diagonal())).sum(-1)

    def inverse_sqrt(self, z: Tensor) -> Tensor:
        """``z / sqrt(diagonal)``."""
        return z / self.diagonal().sqrt()

    def plus(self, other: Diagonal) -> Diagonal:
        """The diagonal sum."""
        return Diagonal(self.diagonal() + other.diagonal())
