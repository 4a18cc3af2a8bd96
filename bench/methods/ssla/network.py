"""SSLA and ASSLA for regression networks, composed of three strategies chosen by the config.

* ``objective`` (:mod:`bench.methods.ssla.ssla_objectives`, by protocol): the authors' MSE-scaled
  likelihood, grid and KDE summary (``paper``) or the Gaussian log joint with a quadrature
  grid (``corrected``);
* ``curvature`` (:mod:`bench.methods.ssla.curvature_weights`): the GGN or the y-dependent
  empirical Fisher, as per-point weights on the unit-noise GGN in ``structure``;
* ``refit`` (SSLA only, :mod:`bench.methods.ssla.refits`): the authors' SGD refit, one
  Gauss-Newton step from theta-hat, or damped Newton to the MAP of D + (x, y).

With the GGN, ASSLA's curvature increment is constant in y (the GGN never sees y), so ASSLA is
the plug-in predictive times a constant: the notes' consequence, kept visible here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from bench.curvature.base import Curvature
from bench.curvature.flat import FlatBackend
from bench.curvature.structures import STRUCTURES, ggn
from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import ConfigError, require_choice
from bench.methods.ssla.batched import batched_outputs
from bench.methods.ssla.curvature_weights import CURVATURE_WEIGHTS, CurvatureWeights, GGNWeights
from bench.methods.ssla.refit_base import Refit, RefitLimits
from bench.methods.ssla.refit_sgd import SGDRefit
from bench.methods.ssla.refits import REFITS
from bench.methods.ssla.ssla_objectives import OBJECTIVES, AuthorsObjective, Objective
from bench.training.regression_network import TrainedNetwork


@dataclass
class NetworkLaplaceBase:
    """Shared set-up: the anchor (theta-hat of a trained base network), the training data and
    curvature there, and the objective's grid and summary."""

    structure: str = "kfac"
    objective: Objective = field(default_factory=AuthorsObjective)
    curvature: CurvatureWeights = field(default_factory=GGNWeights)
    grid_points: int = 20
    grid_width: float = 1.96
    fine_grid_points: int = 201
    fine_grid_sds: float = 8.0
    last: dict = field(default_factory=dict, repr=False)
    fits_on_base: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _require_strategy("method.objective", self.objective, Objective, OBJECTIVES,
                          "protocol")
        _require_strategy("method.curvature", self.curvature, CurvatureWeights,
                          CURVATURE_WEIGHTS)

    def fit(self, data: RegressionSplits, seed: int, base: TrainedNetwork | None = None) -> dict:
        """Keep theta-hat of ``base`` and the training data; build the curvature at theta-hat."""
        if base is None:
            raise ValueError(f"{type(self).__name__}.fit needs the trained base network (base=)")
        require_choice("method.structure", self.structure, STRUCTURES)
        self.base, self.seed = base, seed
        dtype = base.theta.dtype
        self.x, self.y = data.x_train.to(dtype), data.y_train[:, 0].to(dtype)
        self.y_std = float(self.y.std(unbiased=False))
        self.move_anchor(base.theta)
        return {"n_params": base.shape.n_params, "n_train": len(self.y)}

    def move_anchor(self, theta: Tensor) -> None:
        """Make ``theta`` the anchor: the training curvature and the objective's set-up there."""
        self.anchor = theta
        self.ggn = self.training_curvature(theta)
        self.objective.prepare(self)

    def training_curvature(self, theta: Tensor) -> Curvature:
        """Unscaled curvature of the training likelihood at ``theta``."""
        weights = self.curvature.training_weights(self, theta)
        return self.unit_noise_ggn(theta, self.x, weights)

    def unit_noise_ggn(self, theta: Tensor, x: Tensor, weights: Tensor | None,
                       structure: str | None = None) -> Curvature:
        """The (weighted) unit-noise GGN at ``theta`` over ``x``, in ``self.structure``."""
        return ggn(FlatBackend(self.base.shape, theta), x, structure or self.structure, weights)

    def u_inv_u(self, thetas: Tensor, x: Tensor) -> Tensor:
        """``J^T H^-1 J / sigma^2`` of each point ``x_r`` at ``theta_r`` (corrected curvature),
        as ``u . H^-1 u`` through a solve (the operation order the golden cells hold)."""
        shape = self.base.shape
        u = torch.func.vmap(lambda t, xi: shape.jacobian(t, xi.unsqueeze(0))[0])(thetas, x)
        u = u / self.base.noise_variance**0.5
        return (u * self.precision.solve(u)).sum(-1)

    def _grid(self, x: Tensor, m: int) -> tuple[Tensor, Tensor, Tensor | None]:
        """Plug-in predictions at the anchor ``[N]``, the objective's candidate-y grid and its
        ``u^T H^-1 u`` at the anchor (None where the objective has none)."""
        with torch.no_grad():
            y_hat = self.base.shape.forward_1d(self.anchor, x)
        grid, u_inv_u = self.objective.grid(self, x, y_hat, m)
        return y_hat, grid, u_inv_u

    def _summary(self, y_hat: Tensor, grid: Tensor, log_values: Tensor):
        self.last.update(grid=grid, log_values=log_values)
        return self.objective.summary(y_hat, grid, log_values)


@dataclass
class NetworkASSLA(NetworkLaplaceBase):
    """ASSLA: likelihood increment at theta-hat plus the curvature increment of the grid."""

    name: str = "assla"
    grid_points: int = 30

    def predict(self, x: Tensor):
        """Grid log-PPDs at each test input, summarised by the objective."""
        x = x.to(self.base.theta.dtype)
        y_hat, grid, u_inv_u = self._grid(x, self.grid_points)
        log_values = self.objective.assla_log_values(self, x, y_hat, grid, u_inv_u)
        return self._summary(y_hat, grid, log_values)


@dataclass
class NetworkSSLA(NetworkLaplaceBase):
    """SSLA: a refit of the network on D plus each (x, grid y), then eq. 12 at the refit.

    The refit strategy may move the anchor at fit (the damped Newton refit starts from the
    MAP of D); the grid, the reference log joint and the curvature are taken at the anchor.
    ``refit_epochs``, ``refit_max_steps``, ``refit_cg_iterations`` and ``base_max_steps`` are
    the scale limits of the experiment's ``method_limits`` over the refit's own settings
    (None keeps them).
    """

    name: str = "ssla"
    refit: Refit = field(default_factory=SGDRefit)
    refit_epochs: int | None = None
    refit_max_steps: int | None = None
    refit_cg_iterations: int | None = None
    base_max_steps: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_strategy("method.refit", self.refit, Refit, REFITS)
        self.refit = self.refit.limited(RefitLimits(
            epochs=self.refit_epochs, max_steps=self.refit_max_steps,
            cg_iterations=self.refit_cg_iterations, base_max_steps=self.base_max_steps))
        self.refit.check(self.objective, self.curvature)

    def fit(self, data: RegressionSplits, seed: int, base: TrainedNetwork | None = None) -> dict:
        """As the base class, then the refit's own preparation (its diagnostics added)."""
        diagnostics = super().fit(data, seed, base)
        diagnostics.update(self.refit.prepare(self))
        return diagnostics

    def prediction_diagnostics(self) -> dict[str, float]:
        """How the last prediction's refits converged (empty for refits that do not say)."""
        return self.refit.prediction_diagnostics()

    def predict(self, x: Tensor):
        """Grid log-PPDs at each test input from N x m refits, summarised by the objective."""
        x = x.to(self.base.theta.dtype)
        y_hat, grid, hat_u_inv_u = self._grid(x, self.grid_points)
        m = grid.shape[-1]
        x_rep, y_flat = x.repeat_interleave(m, dim=0), grid.reshape(-1)
        thetas = self._refits(x, grid)
        log_lik_train, log_prior = self.objective.training_log_joint(self, thetas)
        hat_train, hat_prior = self.objective.training_log_joint(self, self.anchor.unsqueeze(0))
        f_new = batched_outputs(self.base.shape, thetas, x_rep.unsqueeze(1))[:, 0]
        curvature = self.refit.curvature_term(self, thetas, x_rep, y_flat, hat_u_inv_u)
        log_values = (self.objective.point_log_lik(self, f_new, y_flat) + log_lik_train
                      - hat_train + log_prior - hat_prior + curvature)
        self.last.update(curvature_term=curvature.reshape(-1, m),
                         prior_increment=(log_prior - hat_prior).reshape(-1, m))
        return self._summary(y_hat, grid, log_values.reshape(-1, m).detach())

    def _refits(self, x: Tensor, grid: Tensor) -> Tensor:
        """theta-tilde of every (x, grid y) by the refit strategy."""
        return self.refit.refits(self, x, grid)


def _require_strategy(key: str, value, kind: type, names, choice: str = "name") -> None:
    """A one-line ConfigError unless ``value`` is a strategy of ``kind`` (a config that set
    ``key`` to a plain value instead of choosing through ``key.<choice>``, say)."""
    if not isinstance(value, kind):
        raise ConfigError(f"{key}={value!r} is not valid; {key} is a node whose {choice} is one "
                          f"of: {', '.join(names)}")
