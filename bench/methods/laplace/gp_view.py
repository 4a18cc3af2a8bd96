"""The Laplace-GGN of a binary classifier seen as a Gaussian process (GGN thesis, section 5.3).

Linearising the network at its MAP ``theta*`` turns the Laplace-GGN posterior into a generalised
GP (thesis chapter 3, reproduction notes sections 3 and 6) with

* kernel ``kappa(x, x') = delta^-1 J(x) J(x')^T``, ``J(x)`` the ``1 x P`` Jacobian of the logit
  at ``theta*`` and ``delta`` the prior precision (prior ``N(0, delta^-1 I)``);
* prior mean ``m(x) = f(x; theta*) - J(x) theta*`` (the linearisation's offset);
* importances ``a_i = r(y_i, f(x_i; theta*)) = y_i - s(f_i)``, the Bernoulli residuals, with
  ``s`` the sigmoid.

At a stationary ``theta*`` of ``sum_i -log p(y_i | f_i) + (delta / 2) |theta|^2`` we have
``delta theta* = sum_i J(x_i)^T a_i``, hence the thesis' eq. 5.2 with the offset written out:
``f(x*; theta*) = m(x*) + sum_i a_i kappa(x*, x_i)`` (:meth:`GaussianProcessView.explain`).
For any ``theta`` the two sides differ by ``J(x*) grad L(theta) / delta``; the relative error
over a test set is the self-check of notes section 6 and ``grad L`` its cause:
:meth:`GaussianProcessView.fit` reports ``L(theta)``, ``|grad L|`` and ``|grad L| / |delta theta|``,
:func:`self_check_error` the error. ``grad L`` is autograd's (the derivative 0 at a ReLU kink, the
derivative through one maximal entry of a max-pool window), which is the gradient wherever ``L`` is
differentiable; a ReLU / max-pool network's ``L`` need not have a point where it vanishes.

Everything is computed in float64 on a copy of the network (notes section 1 [R]).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bench.curvature.jacobians import flat_parameters, output_jacobians
from bench.harness.errors import ConfigError, require_positive
from bench.models.classifiers import bernoulli_logit_network
from bench.predictive.categorical import Categorical


def bernoulli_residuals(y: Tensor, f: Tensor) -> Tensor:
    """``r(y, f) = d log p(y | f) / d f = y - sigmoid(f)`` for labels y in {0, 1}: the
    training importances ``a`` of the GP view."""
    return y.to(f.dtype) - torch.sigmoid(f)


def ggn_kernel(jacobians_left: Tensor, jacobians_right: Tensor, prior_precision: float
               ) -> Tensor:
    """``kappa(x, x') = delta^-1 J(x) J(x')^T`` for Jacobian rows ``[n, P]`` and ``[m, P]``:
    an ``[n, m]`` matrix."""
    return jacobians_left @ jacobians_right.T / prior_precision


def self_check_error(f: Tensor, gp_mean: Tensor) -> float:
    """Relative error ``|m + K a - f| / |f|`` of the GP-view reconstruction (notes section 6)."""
    return float((gp_mean - f).norm() / f.norm())


@dataclass(frozen=True)
class GPTerms:
    """The GP view at test inputs: the network's logits ``f [n]``, the offset
    ``m = f - J theta* [n]``, the kernel rows ``kernel [n, N]`` against the training inputs and
    ``gp_mean = m + kernel @ a [n]``, the right-hand side of eq. 5.2."""

    f: Tensor
    offset: Tensor
    kernel: Tensor
    gp_mean: Tensor


@dataclass
class GaussianProcessView:
    """Importances and GGN kernel of a trained single-logit (Bernoulli) network.

    ``prior_precision``: delta, the precision of the isotropic Gaussian prior (the thesis uses
    10 on MNIST 4 vs 9); ``batch_size``: inputs per vmapped Jacobian pass. ``fit`` takes a
    :class:`bench.datasets.training_set.TrainingSet` with labels in {0, 1} and the trained
    network as ``base`` (a one-logit module, or a
    :class:`bench.models.classifiers.TwoClassLogits` around one).
    """

    prior_precision: float = 10.0
    batch_size: int = 500
    name: str = "ggn_gp_view"
    fits_on_base: ClassVar[bool] = True
    _fitted: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        require_positive("method.prior_precision", self.prior_precision)
        if (isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int)
                or self.batch_size <= 0):
            raise ConfigError(f"method.batch_size={self.batch_size!r} is not valid; it must be "
                              "a positive integer")
        self.prior_precision = float(self.prior_precision)

    def fit(self, data: Any, seed: int, base: nn.Module | None = None) -> dict[str, Any]:
        """Jacobians, logits and importances of the training set at the network ``base``;
        returns the MAP diagnostics (nothing is drawn, ``seed`` is unused): the objective
        ``map_objective`` = ``sum_i BCE(y_i, f_i) + (delta / 2) |theta|^2``, its gradient's
        norm ``gradient_norm`` and ``relative_gradient_norm`` = ``|grad L| / |delta theta|``."""
        if base is None:
            raise ValueError("GaussianProcessView needs the trained network as base")
        network = copy.deepcopy(bernoulli_logit_network(base)).double().eval()
        x = data.train_inputs.double()
        y = data.train_labels
        if not bool(((y == 0) | (y == 1)).all()):
            raise ValueError("the GP view of a Bernoulli network needs labels in {0, 1}")
        jacobians = output_jacobians(network, x, self.batch_size)
        with torch.no_grad():
            f = network(x).reshape(-1)
        theta = flat_parameters(network)
        importances = bernoulli_residuals(y.to(f.device), f)
        data_gradient = jacobians.T @ importances
        gradient = self.prior_precision * theta - data_gradient
        self._fitted = {"network": network, "theta": theta, "jacobians": jacobians, "f": f,
                        "importances": importances,
                        "weights": data_gradient / self.prior_precision}
        prior_term = (self.prior_precision * theta).norm()
        objective = (F.binary_cross_entropy_with_logits(f, y.to(f), reduction="sum")
                     + self.prior_precision / 2 * theta.pow(2).sum())
        return {"n_params": int(theta.numel()), "n_train": int(len(x)),
                "prior_precision": self.prior_precision,
                "map_objective": float(objective),
                "gradient_norm": float(gradient.norm()),
                "relative_gradient_norm": float(gradient.norm() / prior_term),
                "train_accuracy": float(((f > 0).long() == y.to(f.device)).double().mean()),
                "max_abs_importance": float(importances.abs().max())}

    def _require_fitted(self) -> dict:
        if not self._fitted:
            raise RuntimeError("call fit before explain or predict")
        return self._fitted

    @property
    def importances(self) -> Tensor:
        """``a_i = y_i - s(f(x_i; theta*))`` of the training points, float64 ``[N]``."""
        return self._require_fitted()["importances"]

    @property
    def train_logits(self) -> Tensor:
        """``f(x_i; theta*)`` of the training points, float64 ``[N]``."""
        return self._require_fitted()["f"]

    def _at(self, x: Tensor) -> tuple[dict, Tensor, Tensor]:
        """The fitted state, the output Jacobians ``[n, P]`` and the logits ``f(x; theta*)``
        ``[n]`` at the test inputs ``x`` (float64)."""
        fitted = self._require_fitted()
        network = fitted["network"]
        x = x.double()
        jacobians = output_jacobians(network, x, self.batch_size)
        with torch.no_grad():
            f = network(x).reshape(-1)
        return fitted, jacobians, f

    def explain(self, x: Tensor) -> GPTerms:
        """Logits, offsets, kernel rows against the training set and the GP-view mean at
        the test inputs ``x``."""
        fitted, jacobians, f = self._at(x)
        kernel = ggn_kernel(jacobians, fitted["jacobians"], self.prior_precision)
        offset = f - jacobians @ fitted["theta"]
        return GPTerms(f, offset, kernel, offset + kernel @ fitted["importances"])

    def predict(self, x: Tensor) -> Categorical:
        """``(1 - s(g), s(g))`` for the GP-view mean ``g = m(x) + sum_i a_i kappa(x, x_i)``
        (computed without the ``[n, N]`` kernel); equals the network's prediction at a
        stationary ``theta*``."""
        fitted, jacobians, f = self._at(x)
        gp_mean = f - jacobians @ fitted["theta"] + jacobians @ fitted["weights"]
        p = torch.sigmoid(gp_mean)
        return Categorical(torch.stack([1 - p, p], dim=1))
