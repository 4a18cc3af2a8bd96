"""Refits that converge: damped Newton on the exact log joint of D plus one pseudo-point.

SSLA's corrected protocol needs, for every test input ``x_r`` and candidate ``y_r``, the MAP
of the training data D plus ``(x_r, y_r)``: a minimum of

    Phi_r(theta) = sum_i (f(x_i) - y_i)^2 / (2 sigma^2) + tau/2 |theta|^2
                   + (f(x_r) - y_r)^2 / (2 sigma^2)

(the negative log joint up to a constant). :func:`damped_newton` minimises R such problems at
once, each from its own start: a damped Newton direction ``(H + lambda_r P_r) d = -g`` from
preconditioned conjugate gradients on exact Hessian-vector products (truncated at a forcing
tolerance or at negative curvature), then an Armijo backtracking line search on the exact
``Phi_r`` (which accepts a change within the rounding of ``Phi_r`` itself: next to the
minimum the decrease a Newton step promises, ``g^T H^-1 g / 2``, falls below what the sum over
D can resolve, and a strict test would reject the step that finishes the refit). The
damping ``lambda_r`` (Levenberg-Marquardt style, in units of the metric ``P_r``) starts at 0,
grows when a step needed backtracking or met negative curvature and shrinks when the full step
was taken, so steps are Newton steps near the minimum (quadratic convergence) and cautious far
from it. The data change by one point, so the preconditioner is shared: the dense GGN
precision ``P`` of D, factorised once, plus the new point's rank-one GGN term ``u_r u_r^T``
through Sherman-Morrison (:class:`RankOnePreconditioner`, O(q^2) per right-hand side). On a
model linear in theta that preconditioner is the exact Hessian, so the first step lands on the
MAP: exact in one step.

A refit has converged when the Euclidean norm of its gradient is at most ``grad_tol``; it stops
unconverged after ``max_steps`` steps or when the line search finds no decrease. Networks are
evaluated in chunks of refits so that one hidden layer's activations stay below
:data:`bench.methods.ssla.batched.MAX_ACTIVATIONS` numbers. :class:`NewtonRefit` is the strategy
network SSLA calls (``method.refit.name=newton``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor

from bench.curvature.base import Curvature
from bench.methods.ssla.batched import MAX_ACTIVATIONS, batched_outputs
from bench.methods.ssla.refit_base import Refit, RefitLimits, dense_precision, require_gaussian_ggn
from bench.models.mlp import MLPShape

if TYPE_CHECKING:
    from bench.methods.ssla.network import NetworkSSLA


@dataclass(frozen=True)
class NewtonSettings:
    """Stopping rule and inner limits of :func:`damped_newton`.

    ``grad_tol``: converged when ``|grad Phi_r| <= grad_tol`` (nats per unit of theta);
    ``max_steps``: Newton steps at most; ``cg_iterations``: conjugate-gradient iterations per
    step at most; ``armijo``: sufficient-decrease constant; ``max_halvings``: step halvings
    before the line search gives up; the damping is multiplied by ``damping_up`` (from at
    least ``damping_floor``) after a troubled step and divided by it after a full step;
    ``rounding_eps``: the line search counts a change of ``Phi_r`` within this many machine
    epsilons relative to ``|Phi_r|`` as no change (the rounding of a sum over the data).
    """

    grad_tol: float = 1e-6
    max_steps: int = 100
    cg_iterations: int = 50
    armijo: float = 1e-4
    max_halvings: int = 40
    damping_up: float = 4.0
    damping_floor: float = 1e-3
    rounding_eps: float = 64.0


@dataclass
class RefitOutcome:
    """Where each refit stopped: ``thetas`` ``[R, q]``, the gradient norm there ``[R]``, the
    Newton steps taken ``[R]`` and whether it converged ``[R]``."""

    thetas: Tensor
    grad_norm: Tensor
    steps: Tensor
    converged: Tensor

    def summary(self) -> dict[str, float]:
        """The distribution a record keeps: max and median gradient norm, max and median
        steps, and the number of refits that did not converge."""
        norms = self.grad_norm.double()
        return {"refit_grad_norm_max": float(norms.max()),
                "refit_grad_norm_median": float(norms.median()),
                "refit_steps_max": float(self.steps.max()),
                "refit_steps_median": float(self.steps.double().median()),
                "refit_not_converged": float((~self.converged).sum())}


@dataclass
class LogJointProblem:
    """``Phi_r`` of R refits: Gaussian likelihood on ``(x, y)`` with noise ``noise_variance``,
    prior ``N(0, I / prior_precision)``, plus the pseudo-point ``(x_new[r], y_new[r])`` of each
    refit (none when ``x_new`` is None: the MAP of D alone)."""

    shape: MLPShape
    x: Tensor
    y: Tensor
    noise_variance: float
    prior_precision: float
    x_new: Tensor | None = None
    y_new: Tensor | None = None

    def values(self, thetas: Tensor, rows: Tensor) -> Tensor:
        """``Phi_r(thetas[k])`` for ``r = rows[k]``, ``[len(rows)]``."""
        f = batched_outputs(self.shape, thetas, self.x)
        value = ((f - self.y) ** 2).sum(-1) / (2 * self.noise_variance)
        value = value + 0.5 * self.prior_precision * thetas.pow(2).sum(-1)
        if self.x_new is not None:
            f_new = batched_outputs(self.shape, thetas, self.x_new[rows].unsqueeze(1))[:, 0]
            value = value + (f_new - self.y_new[rows]) ** 2 / (2 * self.noise_variance)
        return value

    def chunk_size(self) -> int:
        """Refits evaluated together, so that activations stay below ``MAX_ACTIVATIONS``."""
        return max(1, MAX_ACTIVATIONS // ((len(self.x) + 1) * max(self.shape.widths)))


@dataclass
class NewtonRefit(Refit):
    """Damped Newton to the MAP of D + (x, y) for every pseudo-point, from the MAP of D.

    :meth:`prepare` first moves theta-hat to the MAP of D by the same solver (one problem: the
    early-stopped network is not a stationary point, and refits from it would spend most of
    their change finishing the training, differently for each y) and makes it the anchor;
    :meth:`refits` then refits every (x, grid y) from there. A refit has converged when the
    gradient norm of the log joint is at most ``grad_tol``, else it stops after ``max_steps``
    Newton steps of at most ``cg_iterations`` CG iterations (``base_max_steps`` for the MAP of
    D) and is counted as not converged (:meth:`prediction_diagnostics`).

    The steps are preconditioned by the dense GGN precision at the anchor, whatever the
    Laplace ``structure`` is: the structure is the curvature approximation of the log-det
    term, and the refit itself should land on the augmented MAP, which a diagonal or K-FAC
    Newton step does not (it overshoots along directions the structure ignores, and the
    exactly evaluated training log joint then punishes every grid value but the centre).
    """

    grad_tol: float = 1e-6
    max_steps: int = 100
    cg_iterations: int = 50
    base_max_steps: int = 500
    name: ClassVar[str] = "newton"
    outcome: RefitOutcome | None = field(default=None, init=False, repr=False)
    _precision: Curvature | None = field(default=None, init=False, repr=False)

    def check(self, objective, curvature) -> None:
        """Newton steps need the Gaussian log joint and the GGN."""
        require_gaussian_ggn(self.name, objective, curvature)

    def limited(self, limits: RefitLimits) -> NewtonRefit:
        """This refit with ``limits``' step and iteration counts (where set)."""
        changes = {"max_steps": limits.max_steps, "cg_iterations": limits.cg_iterations,
                   "base_max_steps": limits.base_max_steps}
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def settings(self) -> NewtonSettings:
        """The solver settings of one (x, y) refit."""
        return NewtonSettings(grad_tol=self.grad_tol, max_steps=self.max_steps,
                              cg_iterations=self.cg_iterations)

    def prepare(self, method: NetworkSSLA) -> dict:
        """Move ``method``'s anchor to the MAP of D; diagnostics of that solve."""
        self.outcome, self._precision = None, None
        base = method.base
        problem = LogJointProblem(base.shape, method.x, method.y, base.noise_variance,
                                  base.prior_precision)
        start = base.theta.unsqueeze(0)
        rows = torch.zeros(1, dtype=torch.long)
        with torch.no_grad():
            before = float(problem.values(start, rows)[0])
        settings = replace(self.settings(), max_steps=self.base_max_steps)
        outcome = damped_newton(problem, start,
                                RankOnePreconditioner(dense_precision(method, base.theta)),
                                settings)
        method.move_anchor(outcome.thetas[0])
        with torch.no_grad():
            after = float(problem.values(outcome.thetas, rows)[0])
        return {"base_map_grad_norm": float(outcome.grad_norm[0]),
                "base_map_steps": int(outcome.steps[0]),
                "base_map_converged": bool(outcome.converged[0]),
                "base_map_log_joint_gain": before - after,
                "base_map_distance": float((method.anchor - base.theta).norm())}

    def refits(self, method: NetworkSSLA, x: Tensor, grid: Tensor) -> Tensor:
        """Damped Newton from the anchor to the MAP of D + (x_r, y_r) for every pair, with
        the dense GGN precision at the anchor plus the pair's rank-one term preconditioning."""
        base = method.base
        m = grid.shape[-1]
        x_rep, y_flat = x.repeat_interleave(m, dim=0), grid.reshape(-1)
        problem = LogJointProblem(base.shape, method.x, method.y, base.noise_variance,
                                  base.prior_precision, x_rep, y_flat)
        u = base.shape.jacobian(method.anchor, x) / base.noise_variance**0.5
        owner = torch.arange(len(x)).repeat_interleave(len(x_rep) // len(x))
        if self._precision is None:
            self._precision = dense_precision(method, method.anchor)
        preconditioner = RankOnePreconditioner(self._precision, u, owner)
        self.outcome = damped_newton(problem, method.anchor.expand(len(x_rep), -1),
                                     preconditioner, self.settings())
        method.last["refit"] = self.outcome
        return self.outcome.thetas

    def prediction_diagnostics(self) -> dict[str, float]:
        """The last prediction's distribution of final gradient norms and steps over its
        (x, y) pairs (:meth:`RefitOutcome.summary`); empty before a prediction."""
        return {} if self.outcome is None else self.outcome.summary()


class RankOnePreconditioner:
    """``(P + u_r u_r^T)^{-1}`` for refit r: ``P``'s factorisation is shared by every refit
    and the pseudo-point adds ``u_r = J(x_r) / sigma`` (Sherman-Morrison). ``u`` ``[N, q]``
    holds one vector per test input and ``owner`` ``[R]`` says whose each refit is (None: no
    pseudo-point, plain ``P^{-1}``)."""

    def __init__(self, precision: Curvature, u: Tensor | None = None,
                 owner: Tensor | None = None) -> None:
        self.precision, self.u, self.owner = precision, u, owner
        self.dense = precision.to_dense()
        if u is not None:
            self.solved_u = precision.solve(u)
            self.leverage = (u * self.solved_u).sum(-1)

    def solve(self, residual: Tensor, rows: Tensor) -> Tensor:
        """``(P + u_r u_r^T)^{-1} residual[k]`` for ``r = rows[k]``."""
        z = self.precision.solve(residual)
        if self.u is None:
            return z
        who = self.owner[rows]
        projection = (self.u[who] * z).sum(-1, keepdim=True) / (1 + self.leverage[who, None])
        return z - self.solved_u[who] * projection

    def multiply(self, vectors: Tensor, rows: Tensor) -> Tensor:
        """``(P + u_r u_r^T) vectors[k]`` for ``r = rows[k]``."""
        product = vectors @ self.dense
        if self.u is None:
            return product
        u = self.u[self.owner[rows]]
        return product + u * (u * vectors).sum(-1, keepdim=True)


def damped_newton(problem: LogJointProblem, start: Tensor, preconditioner: RankOnePreconditioner,
                  settings: NewtonSettings) -> RefitOutcome:
    """Minimise each ``Phi_r`` from ``start[r]`` ``[R, q]``; chunks of refits run one after
    another (every refit is independent)."""
    parts = [_newton_chunk(problem, start[rows], rows, preconditioner, settings)
             for rows in torch.arange(len(start)).split(problem.chunk_size())]
    return RefitOutcome(*(torch.cat([getattr(p, name) for p in parts])
                          for name in ("thetas", "grad_norm", "steps", "converged")))


def _newton_chunk(problem: LogJointProblem, start: Tensor, rows: Tensor,
                  preconditioner: RankOnePreconditioner,
                  settings: NewtonSettings) -> RefitOutcome:
    """:func:`damped_newton` on the refits ``rows`` (``start`` holds their starting points)."""
    thetas = start.detach().clone()
    count = len(rows)
    steps = torch.zeros(count, dtype=torch.long)
    grad_norm = torch.full((count,), torch.inf, dtype=thetas.dtype)
    converged = torch.zeros(count, dtype=torch.bool)
    alive = torch.ones(count, dtype=torch.bool)
    damping = torch.zeros(count, dtype=thetas.dtype)
    for step in range(settings.max_steps + 1):
        local = alive.nonzero()[:, 0]
        if len(local) == 0:
            break
        variable = thetas[local].requires_grad_(True)
        values = problem.values(variable, rows[local])
        last = step == settings.max_steps
        (gradient,) = torch.autograd.grad(values.sum(), variable, create_graph=not last)
        grad_norm[local] = gradient.detach().norm(dim=-1)
        done = grad_norm[local] <= settings.grad_tol
        converged[local[done]] = True
        alive[local[done]] = False
        if last or done.all():
            alive[local] = False
            break
        keep = ~done
        index = local[keep]
        direction, troubled = _newton_direction(variable, gradient, keep, rows[local],
                                                damping[index], preconditioner, settings)
        moved, full_step, new_thetas = _backtrack(
            problem, variable.detach()[keep], rows[index], values.detach()[keep],
            gradient.detach()[keep], direction, settings)
        thetas[index[moved]] = new_thetas[moved]
        steps[index[moved]] += 1
        alive[index[~moved]] = False
        raised = torch.clamp(damping[index], min=settings.damping_floor) * settings.damping_up
        lowered = damping[index] / settings.damping_up
        lowered = torch.where(lowered < settings.damping_floor, 0.0, lowered)
        damping[index] = torch.where(troubled | ~full_step, raised, lowered)
    return RefitOutcome(thetas, grad_norm, steps, converged)


def _newton_direction(variable: Tensor, gradient: Tensor, keep: Tensor, rows: Tensor,
                      damping: Tensor, preconditioner: RankOnePreconditioner,
                      settings: NewtonSettings) -> tuple[Tensor, Tensor]:
    """Truncated preconditioned CG on ``(H + damping P_r) d = -g`` for the refits ``keep`` of
    the batch; also which refits met non-positive curvature.

    Hessian-vector products differentiate ``gradient`` (built with a graph) once more. Each
    refit stops at residual ``min(0.5, sqrt|g|) |g|`` (a superlinear forcing sequence) or on
    meeting non-positive curvature, keeping the direction so far (the preconditioned steepest
    descent direction if that happens at once), which is always a descent direction.
    """
    g = gradient.detach()[keep]
    rows = rows[keep]
    troubled = torch.zeros(len(g), dtype=torch.bool)
    g_norm = g.norm(dim=-1)
    forcing = torch.clamp(g_norm.sqrt(), max=0.5) * g_norm
    direction = torch.zeros_like(g)
    residual = -g
    z = preconditioner.solve(residual, rows)
    search = z.clone()
    rz = (residual * z).sum(-1)
    running = torch.ones(len(g), dtype=torch.bool)
    for iteration in range(settings.cg_iterations):
        full = torch.zeros_like(gradient)
        full[keep] = search * running.unsqueeze(-1)
        (hessian_search,) = torch.autograd.grad(gradient, variable, grad_outputs=full,
                                                retain_graph=True)
        hessian_search = hessian_search[keep] + damping.unsqueeze(-1) * preconditioner.multiply(
            search, rows)
        curvature = (search * hessian_search).sum(-1)
        negative = running & (curvature <= 0)
        if iteration == 0:
            direction[negative] = z[negative]
        troubled |= negative
        running &= ~negative
        step = torch.where(running, rz / torch.where(running, curvature, 1.0), 0.0)
        direction = direction + step.unsqueeze(-1) * search
        residual = residual - step.unsqueeze(-1) * hessian_search
        running &= residual.norm(dim=-1) > forcing
        if not running.any():
            break
        z = preconditioner.solve(residual, rows)
        rz_next = (residual * z).sum(-1)
        search = z + (rz_next / torch.where(rz == 0, 1.0, rz)).unsqueeze(-1) * search
        rz = rz_next
    return direction, troubled


def _backtrack(problem: LogJointProblem, thetas: Tensor, rows: Tensor, values: Tensor,
               gradient: Tensor, direction: Tensor,
               settings: NewtonSettings) -> tuple[Tensor, Tensor, Tensor]:
    """Armijo backtracking from the full step, halving per refit; which refits moved, which
    took the full step, and where they are now. A trial value above the current one by at
    most ``settings.rounding_eps`` machine epsilons relative passes the sufficient-decrease
    test: the decrease the step promises is then below what the value can resolve."""
    slope = (gradient * direction).sum(-1)
    rounding = settings.rounding_eps * torch.finfo(values.dtype).eps * values.abs()
    alpha = torch.ones_like(values)
    pending = slope < 0
    moved = torch.zeros_like(pending)
    new = thetas.clone()
    with torch.no_grad():
        for _ in range(settings.max_halvings + 1):
            index = pending.nonzero()[:, 0]
            if len(index) == 0:
                break
            candidate = thetas[index] + alpha[index, None] * direction[index]
            trial = problem.values(candidate, rows[index])
            ok = torch.isfinite(trial) & (
                trial <= values[index] + settings.armijo * alpha[index] * slope[index]
                + rounding[index])
            new[index[ok]] = candidate[ok]
            moved[index[ok]] = True
            pending[index[ok]] = False
            alpha[index[~ok]] *= 0.5
    return moved, moved & (alpha == 1), new


def gradient_norm(problem: LogJointProblem, thetas: Tensor, rows: Tensor | None = None) -> Tensor:
    """``|grad Phi_r|`` at ``thetas[k]`` for ``r = rows[k]`` (default: ``r = k``)."""
    variable = thetas.detach().clone().requires_grad_(True)
    rows = torch.arange(len(thetas)) if rows is None else torch.as_tensor(rows)
    (gradient,) = torch.autograd.grad(problem.values(variable, rows).sum(), variable)
    return gradient.norm(dim=-1)


def lbfgs_refit(problem: LogJointProblem, start: Tensor, row: int, grad_tol: float = 1e-8,
                max_iter: int = 20000) -> Tensor:
    """A long full-batch L-BFGS (strong Wolfe) refit of refit ``row`` from ``start`` ``[q]``:
    the independent reference the Newton refit is checked against."""
    theta = start.detach().clone().requires_grad_(True)
    rows = torch.tensor([row])
    optimizer = torch.optim.LBFGS([theta], lr=1, max_iter=max_iter, max_eval=2 * max_iter,
                                  history_size=100, tolerance_grad=grad_tol / math.sqrt(
                                      theta.numel()), tolerance_change=0.0,
                                  line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = problem.values(theta.unsqueeze(0), rows)[0]
        loss.backward()
        return loss

    optimizer.step(closure)
    return theta.detach()
