"""The model contract SSLA and ASSLA are written against.

A model knows its log-likelihood, log-prior, curvature and how to fit itself; SSLA and ASSLA
(bench.methods.ssla.algorithm) use nothing else, so the same functions serve conjugate models
here and neural networks later. Curvatures default to autograd Hessians; models override them with
closed forms where those are cheaper or match the authors' arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor


@dataclass(frozen=True)
class Data:
    """Observations ``y`` with optional inputs ``x`` (rows aligned with ``y``)."""

    y: Tensor
    x: Tensor | None = None

    @property
    def n(self) -> int:
        """Number of observations."""
        return int(self.y.shape[0])

    def with_point(self, x_new: Tensor | None, y_new: Tensor) -> Data:
        """The augmented data set D plus one observation (x_new, y_new)."""
        y = torch.cat((self.y, y_new.reshape(1).to(self.y)))
        if self.x is None:
            return Data(y=y)
        return Data(y=y, x=torch.cat((self.x, x_new.reshape(1, *self.x.shape[1:]).to(self.x))))

    def point(self, x_new: Tensor | None, y_new: Tensor) -> Data:
        """A one-observation data set."""
        y = y_new.reshape(1).to(self.y)
        if self.x is None:
            return Data(y=y)
        return Data(y=y, x=x_new.reshape(1, *self.x.shape[1:]).to(self.x))


class LaplaceModel(Protocol):
    """What SSLA/ASSLA need from a model with parameter vector theta (shape ``(q,)``)."""

    def log_likelihood(self, theta: Tensor, data: Data) -> Tensor:
        """Summed log-likelihood of ``data`` at ``theta`` (a scalar)."""

    def log_prior(self, theta: Tensor) -> Tensor:
        """Log prior density at ``theta`` (a scalar)."""

    def information(self, theta: Tensor, data: Data) -> Tensor:
        """Observed information (negative Hessian of the log-likelihood), ``(q, q)``."""

    def prior_precision(self, theta: Tensor) -> Tensor:
        """Negative Hessian of the log prior, ``(q, q)``."""

    def fit(self, data: Data, objective: str) -> Tensor:
        """Maximiser of the log-likelihood (``"mle"``) or of likelihood plus prior (``"map"``)."""

    def predict_point(self, theta: Tensor, x_new: Tensor | None) -> Tensor:
        """Point prediction y-hat at ``x_new`` (the self-prediction of Algorithm 1)."""


def autograd_information(model: LaplaceModel, theta: Tensor, data: Data) -> Tensor:
    """Negative Hessian of ``model.log_likelihood`` by autograd (reference for closed forms)."""
    hessian = torch.func.hessian(lambda t: model.log_likelihood(t, data))(theta)
    return -hessian.reshape(theta.numel(), theta.numel())


def autograd_prior_precision(model: LaplaceModel, theta: Tensor) -> Tensor:
    """Negative Hessian of ``model.log_prior`` by autograd."""
    hessian = torch.func.hessian(model.log_prior)(theta)
    return -hessian.reshape(theta.numel(), theta.numel())


def newton_fit(
    model: LaplaceModel, data: Data, objective: str, start: Tensor, steps: int = 50,
    tol: float = 1e-12,
) -> Tensor:
    """Generic argmax by Newton's method on the (penalised) log-likelihood via autograd.

    Exact in one step for quadratic objectives (linear-Gaussian models); used where a model
    has no closed-form fit and to cross-check closed forms in tests.
    """

    def objective_fn(t: Tensor) -> Tensor:
        value = model.log_likelihood(t, data)
        return value + model.log_prior(t) if objective == "map" else value

    theta = start.clone()
    for _ in range(steps):
        grad = torch.func.grad(objective_fn)(theta)
        hess = torch.func.hessian(objective_fn)(theta)
        step = torch.linalg.solve(-hess, grad)
        theta = theta + step
        if step.abs().max() <= tol * (1 + theta.abs().max()):
            break
    return theta
