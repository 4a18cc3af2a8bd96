"""The curvlinops backend: GGNs of an ``nn.Module`` from curvlinops-for-pytorch operators.

``GGNLinearOperator`` gives the dense GGN (and its diagonal, layer blocks and EKFAC
eigenvalues, read off it: curvlinops 3.0.1 has no exact diagonal) and ``KFACLinearOperator``
the Kronecker factors, for the modules curvlinops supports (``Linear`` and ``Conv2d`` with
biases). Conventions mapped onto ours:

* the loss is ``MSELoss(reduction="sum")``, ``sum_i (f_i - y_i)^2``, whose output Hessian is 2:
  its GGN is twice the unit-noise GGN, so results are halved (with ``"mean"`` they would also
  carry ``1 / n``). The GGN of a squared loss does not depend on the targets (zeros here);
* K-FAC uses ``fisher_type="type-2"`` (the exact output Hessian, no Monte Carlo labels) with
  weight and bias in one factor pair; its input factor is already the mean over the data. For
  layers without weight sharing KFAC-expand and -reduce coincide;
* per-point weights ``w_i`` enter as an output multiplier ``sqrt(w_i)`` carried in an extra
  input column, which scales each ``J_i`` (and each output gradient ``g_i``) by ``sqrt(w_i)``.
"""

from __future__ import annotations

import torch
from curvlinops import GGNLinearOperator, KFACLinearOperator
from torch import Tensor, nn

from bench.curvature.eigen_kronecker import eigenbasis_diagonal

SUPPORTED_LAYERS = (nn.Linear, nn.Conv2d)


class _PointWeighted(nn.Module):
    """``f(x_i) * sqrt(w_i)`` from inputs ``[x_i, sqrt(w_i)]``."""

    def __init__(self, network: nn.Module):
        super().__init__()
        self.network = network

    def forward(self, x_and_root_weight: Tensor) -> Tensor:
        """The weighted outputs ``[n, 1]``."""
        return self.network(x_and_root_weight[:, :-1]) * x_and_root_weight[:, -1:]


class CurvlinopsBackend:
    """GGNs of a single-output ``module`` at its current parameters (in ``parameters()``
    order, which for ``nn.Sequential`` of ``nn.Linear`` is the flat-parameter layout)."""

    def __init__(self, module: nn.Module):
        self.model = _PointWeighted(module)
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.layers = [m for m in self.model.modules() if isinstance(m, SUPPORTED_LAYERS)]

    def _operator(self, operator, x: Tensor, weights: Tensor | None, **options):
        root_weight = torch.ones_like(x[:, 0]) if weights is None else weights.sqrt()
        data = [(torch.cat([x, root_weight.unsqueeze(-1)], dim=1), x.new_zeros(len(x), 1))]
        return operator(self.model, nn.MSELoss(reduction="sum"), self.params, data,
                        check_deterministic=False, num_data=len(x), **options)

    @property
    def biases(self) -> tuple[bool, ...]:
        """Per supported layer whether it has a bias."""
        return tuple(layer.bias is not None for layer in self.layers)

    def ggn_matrix(self, x: Tensor, weights: Tensor | None) -> Tensor:
        """``GGNLinearOperator @ I``, halved."""
        operator = self._operator(GGNLinearOperator, x, weights)
        return 0.5 * (operator @ torch.eye(operator.shape[1], dtype=x.dtype))

    def ggn_diagonal(self, x: Tensor, weights: Tensor | None) -> Tensor:
        """The dense GGN's diagonal."""
        return self.ggn_matrix(x, weights).diagonal()

    def layer_blocks(self, x: Tensor, weights: Tensor | None) -> list[Tensor]:
        """The dense GGN's diagonal block of each layer."""
        matrix, blocks, start = self.ggn_matrix(x, weights), [], 0
        for layer in self.layers:
            size = sum(p.numel() for p in layer.parameters())
            blocks.append(matrix[start:start + size, start:start + size])
            start += size
        return blocks

    def kronecker_eigenvalues(self, x: Tensor, weights: Tensor | None,
                              bases: list[tuple[Tensor, Tensor]]) -> list[Tensor]:
        """The layer blocks' diagonals in the Kronecker eigenbases (read off the dense GGN)."""
        return [eigenbasis_diagonal(block, u_a, u_g, has_bias)
                for block, (u_a, u_g), has_bias in zip(self.layer_blocks(x, weights), bases,
                                                       self.biases, strict=True)]

    def kronecker_factors(self, x: Tensor, weights: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        """``KFACLinearOperator``'s factors per layer: ``(A, G / 2)``."""
        operator = self._operator(KFACLinearOperator, x, weights, fisher_type="type-2",
                                  separate_weight_and_bias=False, num_per_example_loss_terms=1)
        operator.compute_kronecker_factors()
        names = {layer: name for name, layer in self.model.named_modules()}
        # curvlinops 3.0.1 keeps the factors in these attributes and has no public accessor.
        inputs, grads = operator._input_covariances, operator._gradient_covariances
        return [(inputs[names[layer]], 0.5 * grads[names[layer]]) for layer in self.layers]
