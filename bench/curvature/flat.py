"""The flat backend: the GGN of a flat-parameter MLP by its explicit per-layer formulas.

Works on any network object with ``layers``, ``jacobian(theta, x)`` (per-example output
gradients ``[n, q]``) and, for K-FAC, ``layer_inputs_and_output_grads(theta, x)``, such as
:class:`bench.models.mlp.MLPShape`. Fast for small MLPs, and the default.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.models.mlp import MLPShape


@dataclass(frozen=True)
class FlatBackend:
    """GGNs of ``network`` at the flat parameter vector ``theta``."""

    network: MLPShape
    theta: Tensor

    @property
    def biases(self) -> None:
        """Every layer has a bias."""
        return None

    def ggn_matrix(self, x: Tensor, weights: Tensor | None) -> Tensor:
        """``J^T diag(w) J`` from the Jacobian ``J`` ``[n, q]``."""
        jac = self.network.jacobian(self.theta, x)
        return jac.T @ (jac if weights is None else weights.unsqueeze(-1) * jac)

    def ggn_diagonal(self, x: Tensor, weights: Tensor | None) -> Tensor:
        """``sum_i w_i J_i^2``."""
        squares = self.network.jacobian(self.theta, x) ** 2
        return (squares if weights is None else weights.unsqueeze(-1) * squares).sum(0)

    def layer_blocks(self, x: Tensor, weights: Tensor | None) -> list[Tensor]:
        """Per layer ``J_l^T diag(w) J_l`` from the layer's columns ``J_l`` of the Jacobian."""
        jac = self.network.jacobian(self.theta, x)
        weighted = jac if weights is None else weights.unsqueeze(-1) * jac
        return [jac[:, part].T @ weighted[:, part] for part in self.network.layer_slices()]

    def kronecker_eigenvalues(self, x: Tensor, weights: Tensor | None,
                              bases: list[tuple[Tensor, Tensor]]) -> list[Tensor]:
        """Per layer ``sum_i w_i (U_G^T g_i)^2 ((U_A^T [a_i, 1])^2)^T``: a layer's
        per-example gradient is the outer product ``g_i [a_i, 1]^T``."""
        inputs, grads = self.network.layer_inputs_and_output_grads(self.theta, x)
        eigenvalues = []
        for a, g, (u_a, u_g) in zip(inputs, grads, bases, strict=True):
            a1 = torch.cat([a, torch.ones_like(a[:, :1])], dim=1)
            if weights is not None:
                g = g * weights.sqrt().unsqueeze(-1)
            eigenvalues.append(((g @ u_g) ** 2).T @ (a1 @ u_a) ** 2)
        return eigenvalues

    def kronecker_factors(self, x: Tensor, weights: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        """Per layer ``A = mean_i [a_i, 1][a_i, 1]^T`` and ``G = sum_i w_i g_i g_i^T`` (``g_i``
        the output's gradient w.r.t. the layer's pre-activations)."""
        inputs, grads = self.network.layer_inputs_and_output_grads(self.theta, x)
        factors = []
        for a, g in zip(inputs, grads, strict=True):
            a1 = torch.cat([a, torch.ones_like(a[:, :1])], dim=1)
            if weights is not None:
                g = g * weights.sqrt().unsqueeze(-1)
            factors.append((a1.T @ a1 / x.shape[0], g.T @ g))
        return factors
