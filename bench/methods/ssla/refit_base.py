"""What every SSLA refit strategy offers network SSLA, and the pieces the Newton refits share.

A refit strategy (:mod:`bench.methods.ssla.refit_sgd`, :mod:`~bench.methods.ssla.refit_newton`,
:mod:`~bench.methods.ssla.refit_gauss_newton`) moves theta-hat to theta-tilde for every
pseudo-point ``(x_r, y_r)`` of a prediction grid. :class:`bench.methods.ssla.network.NetworkSSLA`
calls it through :class:`Refit` only; the config chooses it (``method.refit``, see
:func:`bench.methods.ssla.refits.refit_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from torch import Tensor

from bench.curvature.base import Curvature
from bench.harness.errors import ConfigError

if TYPE_CHECKING:
    from bench.methods.ssla.network import NetworkSSLA


@dataclass(frozen=True)
class RefitLimits:
    """Scale limits over a refit's own settings (the experiment's ``method_limits``; None keeps
    the strategy's value): SGD epochs, Newton steps per refit, CG iterations per step and
    Newton steps to the MAP of D."""

    epochs: int | None = None
    max_steps: int | None = None
    cg_iterations: int | None = None
    base_max_steps: int | None = None


class Refit:
    """A refit strategy: ``prepare`` at fit, ``refits`` and ``curvature_term`` at predict."""

    name: ClassVar[str]

    def check(self, objective, curvature) -> None:
        """Raise a one-line ConfigError if the refit cannot run with these strategies."""

    def limited(self, limits: RefitLimits) -> Refit:
        """This refit with ``limits`` over its own settings."""
        return self

    def prepare(self, method: NetworkSSLA) -> dict:
        """Work done once per fit (it may move ``method``'s anchor); returns diagnostics."""
        return {}

    def refits(self, method: NetworkSSLA, x: Tensor, grid: Tensor) -> Tensor:
        """theta-tilde ``[N * m, q]`` for each test input ``x[i]`` and grid value ``grid[i, j]``."""
        raise NotImplementedError

    def curvature_term(self, method: NetworkSSLA, thetas: Tensor, x_rep: Tensor,
                       y_flat: Tensor, hat_u_inv_u: Tensor | None) -> Tensor:
        """The log-det increment of each refit: the objective's, at theta-tilde."""
        return method.objective.refit_curvature_term(method, thetas, x_rep, y_flat)

    def prediction_diagnostics(self) -> dict[str, float]:
        """How the last prediction's refits converged (empty where nothing is measured)."""
        return {}


def require_gaussian_ggn(name: str, objective, curvature) -> None:
    """The Newton refits step on the GGN of the Gaussian log joint: they need the corrected
    protocol's objective and the GGN curvature."""
    if not objective.gaussian_log_joint:
        raise ConfigError(f"method.refit.name={name!r} needs protocol=corrected (a Gaussian "
                          "likelihood with a prior); the paper protocol refits by sgd")
    if not curvature.is_ggn:
        raise ConfigError(f"method.refit.name={name!r} needs method.curvature.name='ggn' (its "
                          "steps use the GGN); valid with empirical_fisher: refit 'sgd'")


def dense_precision(method: NetworkSSLA, theta: Tensor) -> Curvature:
    """``J^T J / sigma^2 + tau I`` of ``method``'s training data at ``theta``, dense."""
    dense = method.unit_noise_ggn(theta, method.x, None, "dense")
    return dense.scaled(1 / method.base.noise_variance, method.base.prior_precision)
