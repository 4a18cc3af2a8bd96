"""The interface every curvature structure implements, and the one a GGN backend implements.

A structure holds a positive semi-definite matrix ``M`` (a GGN, a Fisher, a precision) in some
compressed form and represents ``H = scale * M + shift * I``: ``scale`` is a temperature or
likelihood scale (``1 / sigma^2``) and ``shift`` an isotropic prior precision. Inverses are
Moore-Penrose inverses where ``H`` is singular by construction (a block structure with ``shift
= 0`` is zero off its blocks); log-determinants never go through ``det``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

from torch import Tensor


class GGNBackend(Protocol):
    """Computes a network's outer-product curvature ``sum_i w_i J_i^T Lambda_i J_i`` over inputs
    ``x`` (``weights`` ``[n]``, all ones when None) in the forms the structures need: the
    unit-noise GGN of a single-output network (:class:`bench.curvature.flat.FlatBackend`,
    :class:`bench.curvature.curvlinops_backend.CurvlinopsBackend`) or a likelihood's Fisher of
    an ``nn.Module`` (:class:`bench.curvature.module_curvature.ModuleBackend`). Parameters are
    in layer order, per layer the weight row-major and then the bias."""

    @property
    def biases(self) -> tuple[bool, ...] | None:
        """Per layer whether it has a bias (None: every layer has one)."""

    def ggn_matrix(self, x: Tensor, weights: Tensor | None) -> Tensor:
        """The dense ``q x q`` GGN."""

    def ggn_diagonal(self, x: Tensor, weights: Tensor | None) -> Tensor:
        """The GGN's diagonal ``[q]``."""

    def layer_blocks(self, x: Tensor, weights: Tensor | None) -> list[Tensor]:
        """Per layer the GGN's dense diagonal block, in the layer's parameter order."""

    def kronecker_factors(self, x: Tensor, weights: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        """Per layer, K-FAC's ``(A, G)``: the mean second moment of the layer's inputs with a
        trailing 1 (bias), and the weighted sum of output-gradient outer products."""

    def kronecker_eigenvalues(self, x: Tensor, weights: Tensor | None,
                              bases: list[tuple[Tensor, Tensor]]) -> list[Tensor]:
        """Per layer EKFAC's eigenvalues ``[out, in (+1)]``: the GGN's layer block in the
        Kronecker eigenbasis ``U_G kron U_A`` of ``bases = [(U_A, U_G), ...]``, its diagonal
        ``sum_i w_i (U_G^T grad_i U_A)^2`` (``grad_i`` the layer matrix of ``J_i``'s rows)."""


@dataclass(frozen=True, kw_only=True)
class Curvature(ABC):
    """``scale * M + shift * I`` for a positive semi-definite ``M`` held in a structure."""

    scale: float = 1.0
    shift: float = 0.0
    exact_ggn: ClassVar[bool] = False  # True: holds the GGN itself, singular for n < q points

    @classmethod
    def from_backend(cls, backend: GGNBackend, x: Tensor, weights: Tensor | None) -> Curvature:
        """The GGN of ``backend``'s network over ``x`` (weighted per point) in this structure."""
        raise NotImplementedError(f"{cls.__name__} is not built from a GGN backend")

    def scaled(self, scale: float, shift: float = 0.0) -> Curvature:
        """This curvature times ``scale`` plus ``shift`` on the diagonal."""
        return replace(self, scale=self.scale * scale, shift=self.shift * scale + shift)

    @property
    @abstractmethod
    def n_params(self) -> int:
        """Number of parameters q."""

    @abstractmethod
    def to_dense(self) -> Tensor:
        """The q x q matrix."""

    @abstractmethod
    def diagonal(self) -> Tensor:
        """The diagonal ``[q]``."""

    @abstractmethod
    def diagonal_blocks(self) -> list[Tensor]:
        """Dense diagonal blocks whose direct sum is :meth:`to_dense` (in parameter order for
        contiguous blocks): their log-determinants add up to :meth:`logdet`."""

    @abstractmethod
    def logdet(self) -> Tensor:
        """log det (``-inf`` for a matrix singular by construction or numerically)."""

    @abstractmethod
    def solve(self, b: Tensor) -> Tensor:
        """``H^-1 b`` for right-hand sides ``[..., q]``."""

    @abstractmethod
    def inverse_sqrt(self, z: Tensor) -> Tensor:
        """``S z`` for ``z`` ``[..., q]``, with ``S S^T = H^-1``: standard normal ``z`` become
        draws from ``N(0, H^-1)``."""

    @abstractmethod
    def plus(self, other: Curvature) -> Curvature:
        """The exact sum with a curvature of the same structure (and layout)."""

    def inverse_quadratic_form(self, u: Tensor) -> Tensor:
        """``u^T H^-1 u`` for each row of ``u`` ``[..., q]``."""
        return (u * self.solve(u)).sum(-1)
