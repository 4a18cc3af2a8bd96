"""Natural-gradient variational inference with the GGN: VOGGN, LGVA and OGGN (GGN thesis,
Chapter 4, eq. 4.2-4.3 and Tables 4.1-4.2), full batch and full covariance, one update with
three rules for the pseudo-data ``(f-hat_s, J-hat_s)``:

* VOGGN: draw ``theta_s ~ N(mu_t, Sigma_t)``; ``f-hat_s = f(x; theta_s)``,
  ``J-hat_s = J(x; theta_s)``;
* LGVA: draw ``theta_s`` likewise; ``f-hat_s = f(x; mu_t) + J(x; mu_t)(theta_s - mu_t)``,
  ``J-hat_s = J(x; mu_t)``;
* OGGN: no draw (``S = 1``); ``f-hat = f(x; mu_t)``, ``J-hat = J(x; mu_t)``.

Update with step size ``gamma`` (notes section 5): ``g = 1/S sum_s sum_i J-hat^T r``,
``H = 1/S sum_s sum_i J-hat^T Lambda(f-hat) J-hat``; precision
``Lambda_{t+1} = (1 - gamma) Lambda_t + gamma (delta I + H)``; mean
``mu_{t+1} = mu_t + gamma Lambda_{t+1}^-1 (g - delta mu_t)`` (eq. 4.2 with prior mean 0).
By Theorem 4.1 this is the exact posterior of a Bayesian linear regression (tested). Draws are
``mu + L^-T z`` with ``L`` the Cholesky factor of the precision; everything is float64.

The thesis runs a fixed number of iterations at ``gamma = 0.999``; the corrected protocol adds
a stopping rule (:class:`bench.training.stopping.StationarityRule`) on the gradient of the
objective at the mean, ``g - delta mu_t`` (OGGN: the MAP objective; VOGGN: the ELBO's gradient
in the mean, estimated from the draws; LGVA: that of the linearised model), and on the mean's
step: per iterate for OGGN, averaged over the window for the sampling algorithms. A run also
needs the precision to have forgotten its start (``(1 - gamma)^t <= 1e-3``). Every fit
records why it stopped (``stationary`` or ``max_iterations``), its final gradient norm and
step.

One iteration costs one ``P x P`` product ``R^T R`` of the stacked pseudo-data rows ``R``
(``S N x P``), accumulated into the decayed precision by one BLAS call, and one Cholesky.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import Tensor

from bench.curvature.dense import Dense
from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError, require_positive
from bench.harness.progress import progress
from bench.harness.rng import derived_seed, make_generator
from bench.harness.state_store import Checkpoints, resumable
from bench.methods.laplace.ggn_laplace import GaussianPosterior, GGNPredictive
from bench.methods.laplace.ggn_methods import FIT_STREAM, GGNPosteriorMethod
from bench.methods.variational.ggn_pseudo_data import PSEUDO_DATA_RULES, pseudo_data_rule
from bench.metrics.elbo import elbo_draws
from bench.models.glm_likelihoods import Likelihood
from bench.models.mlp import MLPShape
from bench.training.elbo_plateau import ElboPlateauMonitor, ElboPlateauRule
from bench.training.stopping import StationarityMonitor, StationarityRule, forgetting_iterations

logger = logging.getLogger("bench.training")

ALGORITHMS = tuple(PSEUDO_DATA_RULES)
# Weight (1 - gamma)^t on the starting precision below which a run may stop.
FORGETTING_TOLERANCE = 1e-3
# derived_seed([seed, stream]) stream of the ELBO rule's draws (1 and 2: ggn_methods; 3: the
# predictive task's final ELBO).
ELBO_RULE_STREAM = 4
# Seconds between checkpoints of a resumable run (the save is exact, so the cadence only
# bounds the work an interruption loses).
CHECKPOINT_SECONDS = 60.0
# Checkpoint folders of natural-gradient fits: <results>/states/<kind>/<data set>/<recipe>/.
CHECKPOINT_KIND = "natural_gradient_vi"
# Version of the checkpoint's contents, part of the recipe that names its folder: a checkpoint
# written by code that saved other contents is never read.
CHECKPOINT_FORMAT = 1
# The trace's per-iteration lists a checkpoint keeps (the window and ELBO traces are the
# monitors').
PER_ITERATION = ("mean_change", "log_det_precision", "train_nll", "gradient_norm")
# The stop reasons of a fit that reached a stopping rule (not its iteration cap).
CONVERGED_REASONS = ("stationary", "elbo_plateau")


def require_step_size(key: str, value: float) -> float:
    """``value`` if it lies in ``(0, 1]``, else a one-line ConfigError naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(f"{key}={value!r} is not valid; the step size must lie in (0, 1]")
    return float(value)


@dataclass(frozen=True)
class NaturalGradientState:
    """The variational Gaussian at one iteration: its mean and precision (kept explicitly,
    since ``Lambda_{t+1}`` is built from ``Lambda_t``) with the precision's Cholesky factor."""

    mean: Tensor
    precision: Tensor
    precision_cholesky: Tensor

    @classmethod
    def isotropic(cls, mean: Tensor, variance: float) -> NaturalGradientState:
        """``N(mean, variance I)`` (the thesis starts from ``Sigma_0 = 0.1 I``)."""
        eye = torch.eye(mean.shape[0], dtype=mean.dtype, device=mean.device)
        return cls(mean, eye / variance, eye / variance**0.5)

    @property
    def posterior(self) -> GaussianPosterior:
        """The state as a :class:`GaussianPosterior` (draws, solves, variances) with a dense
        precision that reuses the state's Cholesky factor."""
        return GaussianPosterior(self.mean, Dense.factored(self.precision,
                                                           self.precision_cholesky))

    def log_det_precision(self) -> float:
        """``log det Lambda`` from the Cholesky factor."""
        return float(2 * torch.log(self.precision_cholesky.diagonal()).sum())


def ggn_pseudo_data(algorithm: str, network: MLPShape, state: NaturalGradientState, x: Tensor,
                    mc_samples: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``f-hat`` ``[S, N]`` and ``J-hat`` ``[S, N, P]`` by the algorithm's rule (Table 4.2,
    :mod:`bench.methods.variational.ggn_pseudo_data`); OGGN draws nothing and returns
    ``S = 1``."""
    return pseudo_data_rule(algorithm)(network, state, x, mc_samples, generator)


def pseudo_data_statistics(f_hat: Tensor, jacobians: Tensor, y: Tensor,
                           likelihood: Likelihood) -> tuple[Tensor, Tensor]:
    """``g = 1/S sum_s J-hat_s^T r(f-hat_s)`` and rows ``R`` ``[S N, P]`` with
    ``R^T R = H = 1/S sum_s J-hat_s^T Lambda(f-hat_s) J-hat_s``."""
    n_samples = f_hat.shape[0]
    residuals = torch.stack([likelihood.residual(f_s, y) for f_s in f_hat])
    weights = torch.stack([likelihood.hessian(f_s).expand_as(f_s) for f_s in f_hat])
    gradient = torch.einsum("snp,sn->p", jacobians, residuals) / n_samples
    rows = jacobians * (weights.clamp_min(0) / n_samples).sqrt().unsqueeze(2)
    return gradient, rows.reshape(-1, rows.shape[-1])


def precision_and_mean_update(state: NaturalGradientState, objective_gradient: Tensor,
                              rows: Tensor, prior_precision: float,
                              step_size: float) -> NaturalGradientState:
    """Steps (c)-(d) of notes section 5 given ``g - delta mu_t`` and the rows of ``H``:
    ``Lambda_{t+1} = (1 - gamma) Lambda_t + gamma (delta I + R^T R)``,
    ``mu_{t+1} = mu_t + gamma Lambda_{t+1}^-1 (g - delta mu_t)``."""
    precision = torch.addmm(state.precision, rows.T, rows, beta=1 - step_size,
                            alpha=step_size)
    precision.diagonal().add_(step_size * prior_precision)
    cholesky = torch.linalg.cholesky(precision)
    direction = torch.cholesky_solve(objective_gradient.unsqueeze(1), cholesky).squeeze(1)
    return NaturalGradientState(state.mean + step_size * direction, precision, cholesky)


def natural_gradient_step(state: NaturalGradientState, f_hat: Tensor, jacobians: Tensor,
                          y: Tensor, likelihood: Likelihood, prior_precision: float,
                          step_size: float) -> NaturalGradientState:
    """One update (c)-(d) of notes section 5 from the pseudo-data ``(f-hat_s, J-hat_s)``."""
    gradient, rows = pseudo_data_statistics(f_hat, jacobians, y, likelihood)
    return precision_and_mean_update(state, gradient - prior_precision * state.mean, rows,
                                     prior_precision, step_size)


def finite_or_none(value: float) -> float | None:
    """``value``, or None where it is not finite (a window measure before the window fills)."""
    return value if math.isfinite(value) else None


@dataclass
class NaturalGradientTrace:
    """Per iteration: relative mean change ``|mu_{t+1} - mu_t| / |mu_t|``,
    ``log det Lambda_{t+1}``, the training negative log likelihood at the mean, the norm of the
    gradient of the objective at the mean ``|g - delta mu_t|`` and the stopping rule's window
    measures (:class:`bench.training.stopping.StationarityMonitor`); per ELBO estimate of the
    ELBO rule (:class:`bench.training.elbo_plateau.ElboPlateauMonitor`) its iteration, value,
    standard error and paired improvement over the best; why the run stopped."""

    mean_change: list[float] = field(default_factory=list)
    log_det_precision: list[float] = field(default_factory=list)
    train_nll: list[float] = field(default_factory=list)
    gradient_norm: list[float] = field(default_factory=list)
    window_gradient_norm: list[float] = field(default_factory=list)
    window_step: list[float] = field(default_factory=list)
    stop_reason: str = "max_iterations"
    window_gradient_standard_error: float | None = None
    elbo_iteration: list[int] = field(default_factory=list)
    elbo: list[float] = field(default_factory=list)
    elbo_standard_error: list[float] = field(default_factory=list)
    elbo_improvement: list[float] = field(default_factory=list)
    elbo_improvement_standard_error: list[float] = field(default_factory=list)
    seconds: float = 0.0
    resumed_from_iteration: int = 0

    def take_elbo_trace(self, monitor: ElboPlateauMonitor) -> None:
        """The ELBO rule's estimates (:class:`ElboPlateauMonitor`) into the trace."""
        self.elbo_iteration = monitor.iterations
        self.elbo = monitor.elbo
        self.elbo_standard_error = monitor.standard_error
        self.elbo_improvement = monitor.improvement
        self.elbo_improvement_standard_error = monitor.improvement_standard_error


@dataclass(frozen=True)
class NaturalGradientSchedule:
    """How the updates run, checked once here (one-line errors naming ``method.<key>``): the
    step size ``gamma`` in ``(0, 1]``, at most ``iterations`` updates, the start
    ``Sigma_0 = initial_variance I`` and ``mc_samples`` draws per update."""

    step_size: float
    iterations: int
    initial_variance: float
    mc_samples: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "step_size",
                           require_step_size("method.step_size", self.step_size))
        for key in ("iterations", "initial_variance", "mc_samples"):
            require_positive(f"method.{key}", getattr(self, key))


def progress_snapshot(state: NaturalGradientState, next_iteration: int, seconds: float,
                      trace: NaturalGradientTrace, monitor: StationarityMonitor,
                      elbo_monitor: ElboPlateauMonitor, generator: torch.Generator) -> dict:
    """A run's progress before ``next_iteration`` as tensors, numbers and lists (a
    checkpoint :func:`restore_progress` reads back; the precision's Cholesky factor is
    computed again from it, as the update computed it, instead of doubling the file)."""
    return {"next_iteration": next_iteration, "seconds": seconds, "mean": state.mean,
            "precision": state.precision,
            "trace": {name: list(getattr(trace, name)) for name in PER_ITERATION},
            "monitor": monitor.snapshot(), "elbo_monitor": elbo_monitor.snapshot(),
            "generator": generator.get_state()}


def save_progress(checkpoints: Checkpoints, snapshot: dict) -> None:
    """Save ``snapshot``; a save that fails (a full disk) is a warning, not the fit's end: the
    fit goes on, and an interruption then resumes from the last checkpoint that was saved."""
    try:
        checkpoints.save(snapshot)
    except OSError as err:
        logger.warning("checkpoint not saved (%s); the fit goes on without it", err)


def restore_progress(saved: dict, trace: NaturalGradientTrace, monitor: StationarityMonitor,
                     elbo_monitor: ElboPlateauMonitor, generator: torch.Generator,
                     ) -> tuple[NaturalGradientState, int, float]:
    """Load :func:`progress_snapshot`'s checkpoint into the trace, monitors and generator;
    returns the state, the next iteration and the seconds spent so far."""
    for name in PER_ITERATION:
        setattr(trace, name, list(saved["trace"][name]))
    monitor.restore(saved["monitor"])
    elbo_monitor.restore(saved["elbo_monitor"])
    generator.set_state(saved["generator"])
    precision = saved["precision"]
    state = NaturalGradientState(saved["mean"], precision, torch.linalg.cholesky(precision))
    return state, int(saved["next_iteration"]), float(saved["seconds"])


def run_natural_gradient_vi(algorithm: str, network: MLPShape, x: Tensor, y: Tensor,
                            likelihood: Likelihood, prior_precision: float,
                            initial_mean: Tensor, *, schedule: NaturalGradientSchedule,
                            generator: torch.Generator,
                            stopping: StationarityRule | None = None,
                            elbo_rule: ElboPlateauRule | None = None, elbo_seed: int = 0,
                            checkpoints: Checkpoints | None = None,
                            checkpoint_seconds: float = CHECKPOINT_SECONDS,
                            ) -> tuple[NaturalGradientState, NaturalGradientTrace]:
    """At most ``schedule.iterations`` updates of ``schedule.step_size`` with
    ``schedule.mc_samples`` draws each from ``N(initial_mean, schedule.initial_variance I)``,
    fewer when,
    after the precision has forgotten its start, ``stopping`` finds the mean stationary
    (window averages for VOGGN and LGVA, every iterate of the window for OGGN; stop reason
    ``stationary``) or ``elbo_rule`` finds the ELBO on its plateau (its estimates drawn from
    ``make_generator(elbo_seed)`` each time; ``elbo_plateau``); Monte Carlo draws of the
    updates from ``generator``. Returns the final state and the monitored trace.

    With ``checkpoints`` the run saves its progress (state, trace, monitors, the generator's
    state and the seconds so far) at the start of an iteration once ``checkpoint_seconds``
    have passed since the last save, and a run that finds a checkpoint continues from it: the
    same updates, draws and trace as without the interruption (``trace.seconds`` counts every
    run's seconds, ``trace.resumed_from_iteration`` says where this one began)."""
    stopping = stopping or StationarityRule()
    elbo_monitor = ElboPlateauMonitor(elbo_rule or ElboPlateauRule())
    rule = pseudo_data_rule(algorithm)
    step_size, mc_samples = schedule.step_size, schedule.mc_samples
    state = NaturalGradientState.isotropic(initial_mean.detach().clone(),
                                           schedule.initial_variance)
    trace = NaturalGradientTrace()
    monitor = StationarityMonitor(stopping, averaged=rule.averaged)
    forgotten_after = forgetting_iterations(step_size, FORGETTING_TOLERANCE)
    saved = checkpoints.load() if checkpoints is not None else None
    start, seconds_before = 0, 0.0
    if saved is not None:
        state, start, seconds_before = restore_progress(saved, trace, monitor, elbo_monitor,
                                                        generator)
    started = last_save = time.perf_counter()
    with torch.no_grad():
        for t in progress(range(start, schedule.iterations), desc=algorithm, unit="it"):
            if (checkpoints is not None and t > start
                    and time.perf_counter() - last_save >= checkpoint_seconds):
                save_progress(checkpoints, progress_snapshot(
                    state, t, seconds_before + time.perf_counter() - started, trace, monitor,
                    elbo_monitor, generator))
                last_save = time.perf_counter()
            f_hat, jacobians = rule(network, state, x, mc_samples, generator)
            gradient, rows = pseudo_data_statistics(f_hat, jacobians, y, likelihood)
            objective_gradient = gradient - prior_precision * state.mean
            new = precision_and_mean_update(state, objective_gradient, rows, prior_precision,
                                            step_size)
            monitor.update(state.mean, objective_gradient, new.mean)
            trace.mean_change.append(float((new.mean - state.mean).norm()
                                           / state.mean.norm().clamp_min(1e-300)))
            trace.log_det_precision.append(new.log_det_precision())
            f_mean = network.forward_1d(new.mean, x)
            trace.train_nll.append(float(-likelihood.log_prob(f_mean, y).sum()))
            trace.gradient_norm.append(monitor.gradient_norms[-1])
            state = new
            if t + 1 < forgotten_after:
                continue
            if monitor.stationary():
                trace.stop_reason = "stationary"
                break
            if elbo_monitor.due(t):
                elbo_monitor.update(t, *elbo_draws(
                    network, x, y, likelihood, prior_precision, state.posterior,
                    mc_samples=elbo_monitor.rule.samples, generator=make_generator(elbo_seed)))
                if elbo_monitor.plateaued():
                    trace.stop_reason = "elbo_plateau"
                    break
    trace.take_elbo_trace(elbo_monitor)
    trace.seconds = seconds_before + time.perf_counter() - started
    trace.resumed_from_iteration = start
    trace.window_gradient_standard_error = monitor.gradient_standard_error()
    trace.window_gradient_norm = monitor.window_gradient_trace
    trace.window_step = monitor.window_step_trace
    return state, trace


@dataclass
class NaturalGradientGGN(GGNPosteriorMethod):
    """VOGGN, LGVA or OGGN (``algorithm``) from ``N(mu_0, initial_variance I)`` with ``mu_0``
    the shared initialisation, ``iterations`` full-batch updates of step size ``step_size``
    with ``mc_samples`` draws each (thesis: ``gamma = 0.999``, ``S = 1``, ``Sigma_0 = 0.1 I``),
    fewer when ``stop_window > 0`` and the :class:`StationarityRule` (``stop_window``,
    ``stop_gradient_tolerance``, ``stop_step_tolerance``) finds the mean stationary, or when
    ``stop_elbo_every > 0`` and the :class:`ElboPlateauRule` (``stop_elbo_every``,
    ``stop_elbo_samples``, ``stop_elbo_patience``, ``stop_elbo_ses``) finds the ELBO on its
    plateau. The GLM predictive linearises at the final mean."""

    name: str = "VOGGN"
    algorithm: str = "voggn"
    step_size: float = 0.999
    iterations: int = 1000
    initial_variance: float = 0.1
    mc_samples: int = 1
    stop_window: int = 0
    stop_gradient_tolerance: float = 0.0
    stop_step_tolerance: float = 0.0
    stop_elbo_every: int = 0
    stop_elbo_samples: int = 200
    stop_elbo_patience: int = 5
    stop_elbo_ses: float = 2.0
    trace: NaturalGradientTrace | None = field(default=None, init=False, repr=False)
    stopping: StationarityRule = field(default_factory=StationarityRule, init=False,
                                       repr=False)
    elbo_rule: ElboPlateauRule = field(default_factory=ElboPlateauRule, init=False,
                                       repr=False)
    schedule: NaturalGradientSchedule = field(init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        pseudo_data_rule(self.algorithm)
        self.schedule = NaturalGradientSchedule(self.step_size, self.iterations,
                                                self.initial_variance, self.mc_samples)
        self.stopping = StationarityRule(self.stop_window, self.stop_gradient_tolerance,
                                         self.stop_step_tolerance)
        self.elbo_rule = ElboPlateauRule(self.stop_elbo_every, self.stop_elbo_samples,
                                         self.stop_elbo_patience, self.stop_elbo_ses)
        if self.stop_window > self.iterations:
            raise ConfigError(f"method.stop_window={self.stop_window} is not valid; it must "
                              f"be at most method.iterations={self.iterations}")

    def recipe(self, data: TrainingSet) -> dict[str, Any]:
        """What decides the fit besides the seed (its checkpoints' folder): every setting of
        the method, the network, the training data's identity and SHA-256 and the checkpoint
        format."""
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        return {"checkpoint_format": CHECKPOINT_FORMAT,
                "settings": {key: list(value) if isinstance(value, tuple) else value
                             for key, value in settings.items()},
                "data": {**data.identity(), "sha256": data.content_sha256()}}

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict[str, Any]:
        """Run the iterations (resumable: with ``data.results_dir`` set, an interrupted fit
        continues from its last checkpoint, :func:`run_natural_gradient_vi`). Diagnostics:
        where this run began (``resumed_from_iteration``); why the run stopped
        (``stop_reason``: ``stationary``, ``elbo_plateau`` or ``max_iterations``); the
        iterations and seconds per iteration; the final norm of the gradient of the objective
        at the mean (``final_gradient_norm``: the last iterate's; ``window_gradient_norm`` and
        ``window_step``: the stopping rule's window measures, None without a rule;
        ``window_gradient_standard_error``: the Monte Carlo standard error of the window's
        mean gradient, sampling algorithms); the last relative mean change, ``log det
        Lambda`` and training NLL, and their values 10% of the run earlier."""
        x, y = data.train_inputs, data.train_labels
        network = self.network(int(x.shape[1]))

        def run(checkpoints: Checkpoints | None = None):
            return run_natural_gradient_vi(
                self.algorithm, network, x, y, self.likelihood_model(),
                float(self.prior_precision), self.initial_mean(network, seed),
                schedule=self.schedule, generator=make_generator(derived_seed([seed, FIT_STREAM])),
                stopping=self.stopping, elbo_rule=self.elbo_rule,
                elbo_seed=derived_seed([seed, ELBO_RULE_STREAM]), checkpoints=checkpoints,
                checkpoint_seconds=CHECKPOINT_SECONDS)

        if data.results_dir is None:
            state, trace = run()
        else:
            with resumable(CHECKPOINT_KIND, data.name, self.recipe(data), seed,
                           data.results_dir) as checkpoints:
                state, trace = run(checkpoints)
        seconds = trace.seconds
        self.trace = trace
        self._finish(GGNPredictive(network, state.posterior, state.mean,
                                   self.likelihood_model()), seed)
        earlier = max(0, int(0.9 * len(trace.train_nll)) - 1)
        return {"iterations": len(trace.train_nll),
                "seconds_per_iteration": seconds / len(trace.train_nll),
                "resumed_from_iteration": trace.resumed_from_iteration,
                "stop_reason": trace.stop_reason,
                "converged": trace.stop_reason in CONVERGED_REASONS,
                "stopping_rule": self.stopping.active or self.elbo_rule.active,
                "final_gradient_norm": trace.gradient_norm[-1],
                "window_gradient_norm": finite_or_none(trace.window_gradient_norm[-1]),
                "window_step": finite_or_none(trace.window_step[-1]),
                "window_gradient_standard_error": trace.window_gradient_standard_error,
                "final_mean_change": trace.mean_change[-1],
                "final_log_det_precision": trace.log_det_precision[-1],
                "final_train_nll": trace.train_nll[-1],
                "log_det_precision_at_90pc": trace.log_det_precision[earlier],
                "train_nll_at_90pc": trace.train_nll[earlier],
                "n_params": network.n_params}
