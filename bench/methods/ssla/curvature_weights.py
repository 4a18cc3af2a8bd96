"""Per-point weights on the unit-noise GGN: which curvature network SSLA and ASSLA use.

:class:`GGNWeights` (``method.curvature.name=ggn``) is the authors' y-free curvature;
:class:`EmpiricalFisherWeights` (``empirical_fisher``) swaps in the y-dependent empirical
Fisher (outer products of per-point log-likelihood gradients, weights from the objective), the
variant under which corrected ASSLA is no longer a rescaled plug-in. In the paper protocol the
authors' one-batch grid curvature still makes it one scalar. The config picks one by name
(:func:`curvature_weights_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor

from bench.harness.errors import require_choice
from bench.methods.ssla.batched import batched_outputs

if TYPE_CHECKING:
    from bench.methods.ssla.network import NetworkLaplaceBase


class CurvatureWeights:
    """The weights of the training points, of pseudo-points and of grid residuals."""

    name: ClassVar[str]
    # Whether the curvature is the plain GGN (the Newton refits' steps use it).
    is_ggn: ClassVar[bool]

    def weights(self, method: NetworkLaplaceBase, residuals: Tensor) -> Tensor | None:
        """Weights of points with ``residuals`` (None: all ones)."""
        raise NotImplementedError

    def training_weights(self, method: NetworkLaplaceBase, theta: Tensor) -> Tensor | None:
        """Weights of the training points at ``theta`` (None: all ones)."""
        raise NotImplementedError

    def point_weights(self, method: NetworkLaplaceBase, thetas: Tensor, x: Tensor,
                      y: Tensor) -> Tensor:
        """The weight of each pseudo-point ``(x_r, y_r)`` at ``theta_r``."""
        raise NotImplementedError

    def grid_weights(self, method: NetworkLaplaceBase, residuals: Tensor) -> Tensor:
        """The weight of each candidate's residual from the plug-in prediction."""
        raise NotImplementedError


@dataclass(frozen=True)
class GGNWeights(CurvatureWeights):
    """The GGN: every point weighs 1, whatever its y."""

    name: ClassVar[str] = "ggn"
    is_ggn: ClassVar[bool] = True

    def weights(self, method, residuals):
        """None (unit weights)."""
        return None

    def training_weights(self, method, theta):
        """None (unit weights)."""
        return None

    def point_weights(self, method, thetas, x, y):
        """Ones."""
        return torch.ones_like(y)

    def grid_weights(self, method, residuals):
        """Ones."""
        return torch.ones_like(residuals)


@dataclass(frozen=True)
class EmpiricalFisherWeights(CurvatureWeights):
    """The empirical Fisher: each point weighs its squared log-likelihood gradient."""

    name: ClassVar[str] = "empirical_fisher"
    is_ggn: ClassVar[bool] = False

    def weights(self, method, residuals):
        """The objective's empirical-Fisher weights of ``residuals``."""
        return method.objective.empirical_fisher_weights(method, residuals)

    def training_weights(self, method, theta):
        """Weights of the training residuals at ``theta``."""
        return self.weights(method, method.y - method.base.shape.forward_1d(theta, method.x))

    def point_weights(self, method, thetas, x, y):
        """Weights of each pseudo-point's residual at its refit."""
        f = batched_outputs(method.base.shape, thetas, x.unsqueeze(1))[:, 0]
        return self.weights(method, y - f)

    def grid_weights(self, method, residuals):
        """Weights of the candidates' residuals."""
        return self.weights(method, residuals)


CURVATURE_WEIGHTS: dict[str, type[CurvatureWeights]] = {
    "ggn": GGNWeights, "empirical_fisher": EmpiricalFisherWeights}


def curvature_weights_for(name: str) -> CurvatureWeights:
    """The curvature weights called ``name`` (the config's ``method.curvature`` node)."""
    return CURVATURE_WEIGHTS[require_choice("method.curvature.name", name, CURVATURE_WEIGHTS)]()
