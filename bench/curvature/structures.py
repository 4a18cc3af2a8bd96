"""Generalised Gauss-Newton curvature of a single-output MLP in three structures.

The GGN with unit noise is ``sum_i J_i J_i^T`` (J_i the output's gradient at x_i). Structures:
``dense`` (q x q), ``diag`` (its diagonal) and ``kfac`` (per layer, the Kronecker product of
the mean input second moment and the mean output-gradient second moment, times n — as
nngeometry's PMatKFAC). Each is a :class:`Curvature` that can be scaled, shifted by a
multiple of the identity, solved against, and log-determined without ``det``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.curvature.linalg import logdet_spd
from bench.harness.errors import require_choice
from bench.models.mlp import MLPShape

STRUCTURES = ("diag", "kfac", "dense")


@dataclass
class Curvature:
    """``scale * M + shift * I`` for a GGN ``M`` held in one of :data:`STRUCTURES`."""

    structure: str
    shape: MLPShape
    parts: object
    scale: float = 1.0
    shift: float = 0.0

    def scaled(self, scale: float, shift: float = 0.0) -> Curvature:
        """This curvature times ``scale`` plus ``shift`` on the diagonal."""
        return Curvature(self.structure, self.shape, self.parts, self.scale * scale,
                         self.shift * scale + shift)

    def to_dense(self) -> Tensor:
        """The q x q matrix."""
        if self.structure == "dense":
            m = self.parts
        elif self.structure == "diag":
            m = torch.diag(self.parts)
        else:
            m = torch.block_diag(*[_kfac_block_dense(a, g) for a, g in self.parts])
        return self.scale * m + self.shift * torch.eye(m.shape[0], dtype=m.dtype)

    def diagonal_blocks(self) -> list[Tensor]:
        """The dense diagonal blocks whose direct sum is :meth:`to_dense`: one q x q block
        (dense), one per layer (kfac), or q 1 x 1 blocks as a single ``[q, 1, 1]`` (diag)."""
        if self.structure == "diag":
            return [(self.scale * self.parts + self.shift).reshape(-1, 1, 1)]
        if self.structure == "dense":
            return [self.to_dense()]
        blocks = []
        for a, g in self.parts:
            block = self.scale * _kfac_block_dense(a, g)
            blocks.append(block + self.shift * torch.eye(block.shape[0], dtype=block.dtype))
        return blocks

    def logdet(self) -> Tensor:
        """log det, through Cholesky/eigenvalues (``-inf`` for a singular matrix)."""
        if self.structure == "diag":
            return torch.log(self.scale * self.parts + self.shift).sum()
        if self.structure == "kfac":
            total = torch.zeros((), dtype=self.parts[0][0].dtype)
            for a, g in self.parts:
                la, lg = torch.linalg.eigvalsh(a).clamp(min=0), torch.linalg.eigvalsh(g).clamp(
                    min=0)
                total = total + torch.log(self.scale * torch.outer(lg, la) + self.shift).sum()
            return total
        if self.shift > 0:
            return logdet_spd(self.to_dense())
        sign, value = torch.linalg.slogdet(self.to_dense())
        return value if sign > 0 else torch.tensor(-torch.inf, dtype=value.dtype)

    def inverse(self) -> CurvatureInverse:
        """A solver for ``M v = b`` (requires ``shift > 0`` or a non-singular M)."""
        return CurvatureInverse(self)


class CurvatureInverse:
    """Solves against a :class:`Curvature` (batched right-hand sides ``[..., q]``)."""

    def __init__(self, curvature: Curvature):
        self.c = curvature
        if curvature.structure == "dense":
            self.cholesky = torch.linalg.cholesky(curvature.to_dense())
        elif curvature.structure == "kfac":
            self.eig = [(torch.linalg.eigh(a), torch.linalg.eigh(g)) for a, g in curvature.parts]

    def solve(self, b: Tensor) -> Tensor:
        """``M^{-1} b`` for ``b`` of shape ``[..., q]``."""
        c = self.c
        if c.structure == "diag":
            return b / (c.scale * c.parts + c.shift)
        if c.structure == "dense":
            flat = b.reshape(-1, b.shape[-1]).T
            return torch.cholesky_solve(flat, self.cholesky).T.reshape(b.shape)
        out, start = [], 0
        for (fan_in, fan_out), ((la, qa), (lg, qg)) in zip(c.shape.layers, self.eig, strict=True):
            size = fan_out * (fan_in + 1)
            block = _layer_matrix(b[..., start:start + size], fan_in, fan_out)
            rotated = qg.T @ block @ qa
            rotated = rotated / (c.scale * torch.outer(lg.clamp(min=0), la.clamp(min=0)) + c.shift)
            out.append(_layer_vector(qg @ rotated @ qa.T))
            start += size
        return torch.cat(out, dim=-1)


def ggn(shape: MLPShape, theta: Tensor, x: Tensor, structure: str,
        weights: Tensor | None = None) -> Curvature:
    """Unit-noise GGN ``sum_i w_i J_i J_i^T`` at ``theta`` over inputs ``x`` in ``structure``.

    ``weights`` (default all ones) turn it into other outer-product curvatures: the empirical
    Fisher of a Gaussian likelihood is ``w_i = (y_i - f_i)^2 / sigma^2`` in these units (see
    :func:`empirical_fisher_weights`). K-FAC weights the output-gradient factor only.
    """
    require_choice("method.structure", structure, STRUCTURES)
    if structure == "kfac":
        inputs, grads = shape.layer_inputs_and_output_grads(theta, x)
        n = x.shape[0]
        parts = []
        for a, g in zip(inputs, grads, strict=True):
            a1 = torch.cat([a, torch.ones_like(a[:, :1])], dim=1)
            if weights is not None:
                g = g * weights.sqrt().unsqueeze(-1)
            parts.append((a1.T @ a1 / n, g.T @ g))
        return Curvature("kfac", shape, parts)
    jac = shape.jacobian(theta, x)
    if weights is not None:
        jac = jac * weights.sqrt().unsqueeze(-1)
    if structure == "diag":
        return Curvature("diag", shape, (jac**2).sum(0))
    return Curvature("dense", shape, jac.T @ jac)


def empirical_fisher_weights(residuals: Tensor, noise_variance: float) -> Tensor:
    """GGN weights that make :func:`ggn` the empirical Fisher of a Gaussian likelihood.

    The log-likelihood gradient of one point is ``J r / sigma^2`` (``r = y - f``), so its outer
    product is ``(r^2 / sigma^2) * J J^T / sigma^2``: weights ``r^2 / sigma^2`` on the unit-noise
    GGN, which the caller then scales by ``1 / sigma^2`` as it does for the GGN. Unlike the GGN
    this depends on y.
    """
    return residuals**2 / noise_variance


def _layer_matrix(v: Tensor, fan_in: int, fan_out: int) -> Tensor:
    """Layer parameters (weight row-major, then bias) as ``[..., fan_out, fan_in + 1]``."""
    weight = v[..., : fan_in * fan_out].reshape(*v.shape[:-1], fan_out, fan_in)
    return torch.cat([weight, v[..., fan_in * fan_out:].unsqueeze(-1)], dim=-1)


def _layer_vector(m: Tensor) -> Tensor:
    """Inverse of :func:`_layer_matrix`."""
    return torch.cat([m[..., :-1].flatten(-2), m[..., -1]], dim=-1)


def _kfac_block_dense(a: Tensor, g: Tensor) -> Tensor:
    """The K-FAC block ``G kron A`` permuted into the parameter order."""
    fan_out, fan_in = g.shape[0], a.shape[0] - 1
    full = torch.kron(g, a)
    index = torch.arange(fan_out * (fan_in + 1)).reshape(fan_out, fan_in + 1)
    order = _layer_vector(index)
    return full[order][:, order]
