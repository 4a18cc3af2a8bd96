"""Online marginal-likelihood training (Immer et al. 2021), as laplace-torch 0.3's
``marglik_training`` runs it, on the one training loop and resumable at epoch granularity.

What one run does (Laplace Redux Table 2, reproduction notes section 2):

* the network trains on ``mean CE + 0.5 * theta^T diag(delta) theta / N`` (``delta`` the prior
  precision expanded over the parameters, held fixed within an epoch) by Adam at ``lr`` with a
  cosine decay to ``min_lr`` over every minibatch step of the ``epochs``
  (:func:`bench.training.loop.fit_parameters`, ``schedule_unit="step"``);
* after every epoch ``e`` (1-based) with ``e % marglik_frequency == 0`` and
  ``e >= burnin_epochs``, the caller's ``evidence`` function fits a Laplace approximation
  around the current weights on the refit set and returns the negative log marginal
  likelihood as a function of the prior precision
  (:func:`bench.methods.laplace.marglik.laplace_evidence`); then ``hyper_steps`` Adam steps
  at ``hyper_lr`` on ``log delta`` descend it (one hyper-optimizer for the whole run, as
  laplace-torch keeps it);
* the epoch whose last hyper-step value is the lowest so far is remembered (weights and the
  prior precision that value was computed at); the run ends with those restored.

Where this differs from calling ``marglik_training`` (and why it is our own loop):

* every epoch writes a checkpoint (network, Adam and schedule state, minibatch generator,
  global RNG, ``log delta``, the hyper-optimizer, the best epoch so far, the history) and a
  killed run resumes from it exactly; ``marglik_training`` keeps all of this in memory;
* the minibatch order comes from an explicit generator (``marglik_training`` iterates the
  loader it is given, so the order is the loader's);
* ``refit_size`` optionally refits the Laplace approximation on a fixed random subset of the
  training set (drawn once from the seed) with laplace-torch's ``temperature = n / N``, which
  scales the subset's curvature and loss by ``N / n``: an unbiased estimate of the full-data
  log likelihood and of the diagonal or full GGN (for K-FAC the product of two estimated
  factors) at a fraction of the cost (cpu scale; None = every point);
* ``subset_of_weights="last_layer"`` (a last-layer Laplace approximation, scalar prior): the
  learned precision regularises the last layer's weights, the other weights keep the initial
  ``prior_precision``.

The evidence is computed with the network in eval mode (no dropout in the curvature;
laplace-torch's loop leaves it in train mode, the same for networks without dropout or batch
norm, like the LeNet).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils import parameters_to_vector
from torch.utils.data import DataLoader, TensorDataset

from bench.harness.errors import ConfigError, require_choice
from bench.harness.rng import (
    global_rng_state,
    make_generator,
    seeded_global_rng,
    set_global_rng_state,
)
from bench.harness.state_store import Checkpoints
from bench.harness.timing import Stopwatch
from bench.training.loop import LoopState, TrainingConfig, fit_parameters

SUBSETS = ("all", "last_layer")
PRIOR_STRUCTURES = ("scalar", "layerwise")
MODEL_PREFIX = "model."

# prior precision -> negative log marginal likelihood (differentiable in the precision).
HyperObjective = Callable[[Tensor], Tensor]
# (network, refit loader, prior precision, temperature, last layer name) -> HyperObjective.
Evidence = Callable[[nn.Module, DataLoader, Tensor, float, str], HyperObjective]


@dataclass
class OnlineMarglikHyperparameters:
    """The training hyperparameters :class:`OnlineMarglikSettings` and the method that runs it
    (:class:`~bench.methods.laplace.online_marglik.OnlineMarglikLaplace`) both take, declared
    once (defaults: Laplace Redux Table 2 with laplace-torch's ``marglik_training`` arguments
    of the notes, section 2). Not frozen, as the method's dataclass that inherits it is not."""

    subset_of_weights: str = "all"
    prior_structure: str = "layerwise"
    prior_precision: float = 30.0
    epochs: int = 250
    lr: float = 1e-3
    min_lr: float = 1e-6
    batch_size: int = 512
    hyper_lr: float = 1.0
    hyper_steps: int = 100
    marglik_frequency: int = 1
    burnin_epochs: int = 0
    refit_size: int | None = None

    def hyperparameters(self) -> dict[str, Any]:
        """These fields' values by name."""
        return {f.name: getattr(self, f.name) for f in fields(OnlineMarglikHyperparameters)}


@dataclass
class OnlineMarglikSettings(OnlineMarglikHyperparameters):
    """How :func:`train_online_marglik` trains (module docstring): the shared hyperparameters
    and the refit's batch size."""

    refit_batch_size: int = 512

    def check(self) -> None:
        """A one-line ConfigError naming ``method.<key>`` for the first bad value."""
        require_choice("method.subset_of_weights", self.subset_of_weights, SUBSETS)
        require_choice("method.prior_structure", self.prior_structure, PRIOR_STRUCTURES)
        for key in ("epochs", "batch_size", "hyper_steps", "marglik_frequency",
                    "refit_batch_size"):
            _require_int(key, getattr(self, key), 1)
        _require_int("burnin_epochs", self.burnin_epochs, 0)
        if self.refit_size is not None:
            _require_int("refit_size", self.refit_size, 1)
        for key in ("prior_precision", "lr", "hyper_lr"):
            _require_number(key, getattr(self, key), positive=True)
        _require_number("min_lr", self.min_lr, positive=False)
        if self.subset_of_weights == "last_layer" and self.prior_structure != "scalar":
            raise ConfigError(f"method.prior_structure={self.prior_structure!r} is not valid "
                              "with method.subset_of_weights='last_layer'; choose one of: "
                              "scalar")

    def is_marglik_epoch(self, epoch: int) -> bool:
        """Whether the 1-based ``epoch`` ends with a refit and hyper-steps."""
        return epoch % self.marglik_frequency == 0 and epoch >= self.burnin_epochs

    def to_dict(self) -> dict:
        """The settings as a JSON-able dict (for a stored-state recipe)."""
        return asdict(self)


def _require_int(key: str, value: Any, smallest: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < smallest:
        raise ConfigError(f"method.{key}={value!r} is not valid; it must be an integer >= "
                          f"{smallest}")


def _require_number(key: str, value: Any, positive: bool) -> None:
    ok = (isinstance(value, int | float) and not isinstance(value, bool)
          and math.isfinite(value) and (value > 0 if positive else value >= 0))
    if not ok:
        bound = "a positive number" if positive else "a number >= 0"
        raise ConfigError(f"method.{key}={value!r} is not valid; it must be {bound}")


def last_layer_name(network: nn.Module) -> str:
    """The name of the last module (in ``named_modules`` order) holding parameters of its own:
    the layer laplace-torch's last-layer classes approximate."""
    names = [name for name, module in network.named_modules()
             if any(True for _ in module.parameters(recurse=False))]
    if not names:
        raise ValueError("the network has no parameters")
    return names[-1]


def laplace_prior(log_prior: Tensor) -> Tensor:
    """The prior precision laplace-torch receives: ``exp(log delta)``."""
    return log_prior.exp()


def all_weights_precisions(prior: Tensor, network: nn.Module, settings: OnlineMarglikSettings,
                           last_layer: str) -> Tensor:
    """All-weights Laplace: the learned ``prior`` for every tensor (one value expanded, or one
    per tensor)."""
    return prior.expand(len(list(network.parameters()))) if prior.numel() == 1 else prior


def last_layer_precisions(prior: Tensor, network: nn.Module, settings: OnlineMarglikSettings,
                          last_layer: str) -> Tensor:
    """Last-layer Laplace: the learned scalar ``prior`` for ``last_layer``'s tensors, the
    initial ``settings.prior_precision`` for the others."""
    covered = [name.startswith(f"{last_layer}.") for name, _ in network.named_parameters()]
    fixed = torch.full((len(covered),), float(settings.prior_precision), dtype=prior.dtype,
                       device=prior.device)
    return torch.where(torch.tensor(covered, device=prior.device), prior.reshape(()), fixed)


# The training penalty's per-tensor precisions by ``method.subset_of_weights``.
TENSOR_PRECISIONS = {"all": all_weights_precisions, "last_layer": last_layer_precisions}


def tensor_precisions(prior: Tensor, network: nn.Module, settings: OnlineMarglikSettings,
                      last_layer: str) -> Tensor:
    """The prior precision of each parameter tensor of ``network`` ``[n_tensors]`` for the
    training penalty: the learned ``prior`` (scalar or one per tensor) for the weights the
    Laplace approximation covers; with a last-layer approximation the other tensors keep the
    initial ``settings.prior_precision``."""
    return TENSOR_PRECISIONS[settings.subset_of_weights](prior, network, settings, last_layer)


# The number of learned prior precisions by ``method.prior_structure``: one, or one per
# parameter tensor of the network.
PRIOR_SIZES = {"scalar": lambda network: 1,
               "layerwise": lambda network: len(list(network.parameters()))}


def penalised_loss(network: nn.Module, x: Tensor, y: Tensor, precisions: Tensor,
                   n_data: int) -> Tensor:
    """``mean CE(network(x), y) + 0.5 * theta^T diag(delta) theta / n_data`` with ``delta`` the
    per-tensor ``precisions`` expanded over the parameters (laplace-torch's training loss)."""
    parameters = list(network.parameters())
    theta = parameters_to_vector(parameters)
    delta = torch.cat([d * torch.ones_like(p).flatten() for d, p in zip(precisions, parameters,
                                                                          strict=True)])
    return (torch.nn.functional.cross_entropy(network(x), y)
            + 0.5 * (delta * theta) @ theta / n_data)


def marglik_step(objective: HyperObjective, log_prior: Tensor,
                 optimizer: torch.optim.Optimizer, steps: int) -> tuple[list[float], Tensor]:
    """``steps`` optimizer steps on ``log_prior`` against ``objective(exp(log_prior))``.

    Returns every step's objective value (each computed before its update) and the prior
    precision the last value was computed at."""
    values, prior = [], laplace_prior(log_prior)
    for _ in range(steps):
        optimizer.zero_grad()
        prior = laplace_prior(log_prior)
        value = objective(prior)
        value.backward()
        optimizer.step()
        values.append(float(value.detach()))
    return values, prior.detach().clone()


@dataclass
class BestEpoch:
    """The epoch with the lowest negative log marginal likelihood so far: its number (0 =
    none yet), value, weights and prior precision."""

    epoch: int = 0
    neg_log_marglik: float = math.inf
    model: dict[str, Tensor] | None = None
    prior_precision: Tensor | None = None

    def offer(self, epoch: int, neg_log_marglik: float, model: nn.Module,
              prior_precision: Tensor) -> bool:
        """Keep ``epoch`` (copies of the weights and prior precision) if its value is strictly
        lower."""
        if not neg_log_marglik < self.neg_log_marglik:
            return False
        self.epoch, self.neg_log_marglik = epoch, neg_log_marglik
        self.model = copy.deepcopy(model.state_dict())
        self.prior_precision = prior_precision.detach().clone()
        return True

    def to_dict(self) -> dict:
        """Plain values for a checkpoint (the prior precision under the key ``prior``, as
        checkpoints written before the rename hold it)."""
        return {"epoch": self.epoch, "neg_log_marglik": self.neg_log_marglik,
                "model": self.model, "prior": self.prior_precision}

    @classmethod
    def from_dict(cls, values: dict) -> BestEpoch:
        """The best epoch :meth:`to_dict` wrote."""
        return cls(values["epoch"], values["neg_log_marglik"], values["model"],
                   values["prior"])


def refit_rows(n_data: int, refit_size: int | None, generator: torch.Generator) -> Tensor:
    """The training rows the Laplace approximation is refitted on: all, or ``refit_size`` of
    them drawn without replacement from ``generator`` (in increasing order)."""
    if refit_size is None or refit_size >= n_data:
        return torch.arange(n_data)
    return torch.randperm(n_data, generator=generator)[:refit_size].sort().values


@dataclass
class OnlineMarglikResult:
    """The restored network's weights (``model`` state dict), the prior precision
    laplace-torch receives (scalar or one per tensor), the best epoch and its negative log
    marginal likelihood, and the per-epoch history."""

    model: dict[str, Tensor]
    prior_precision: Tensor
    best_epoch: int
    best_neg_log_marglik: float
    history: list[dict]

    def to_state(self) -> dict[str, Any]:
        """A flat dict of tensors and numbers for the trained-state store."""
        return {**{f"{MODEL_PREFIX}{k}": v for k, v in self.model.items()},
                "prior_precision": self.prior_precision, "best_epoch": self.best_epoch,
                "best_neg_log_marglik": self.best_neg_log_marglik}

    @classmethod
    def from_state(cls, state: dict[str, Any], history: list[dict]) -> OnlineMarglikResult:
        """The result :meth:`to_state` flattened."""
        model = {k[len(MODEL_PREFIX):]: v for k, v in state.items() if k.startswith(MODEL_PREFIX)}
        return cls(model, state["prior_precision"], int(state["best_epoch"]),
                   float(state["best_neg_log_marglik"]), history)


@dataclass(frozen=True)
class RunStreams:
    """The seeds of one run's random streams: minibatch order, torch's global RNG (dropout)
    and the refit subset."""

    minibatch: int
    global_rng: int
    refit: int


class _Run:
    """One online-marglik run: the loss closure, the epoch hook and the checkpointed state."""

    def __init__(self, network: nn.Module, images: Tensor, labels: Tensor,
                 settings: OnlineMarglikSettings, evidence: Evidence, streams: RunStreams,
                 checkpoints: Checkpoints) -> None:
        self.network, self.images, self.labels = network, images, labels
        self.settings, self.evidence, self.checkpoints = settings, evidence, checkpoints
        self.n_data = len(labels)
        reference = next(network.parameters())
        self.device = reference.device
        self.last_layer = last_layer_name(network)
        n_prior = PRIOR_SIZES[settings.prior_structure](network)
        rows = refit_rows(self.n_data, settings.refit_size, make_generator(streams.refit))
        self.refit_loader = DataLoader(TensorDataset(images[rows.to(images.device)],
                                                     labels[rows.to(labels.device)]),
                                       batch_size=settings.refit_batch_size)
        self.temperature = len(rows) / self.n_data
        self.log_prior = torch.full((n_prior,), math.log(settings.prior_precision),
                                    device=self.device, dtype=reference.dtype,
                                    requires_grad=True)
        self.hyper_optimizer = torch.optim.Adam([self.log_prior], lr=settings.hyper_lr)
        self.batches = make_generator(streams.minibatch)
        self.best, self.history = BestEpoch(), []
        self.objective_sum, self.n_batches = 0.0, 0
        self.started = time.perf_counter()

    def restore(self, saved: dict) -> LoopState:
        """Load a checkpoint :meth:`epoch_end` saved; the loop state to resume from."""
        self.network.load_state_dict(saved["model"])
        self.batches.set_state(saved["batch_rng"])
        set_global_rng_state(saved["global_rng"], self.device)
        with torch.no_grad():
            self.log_prior.copy_(saved["log_prior"])
        self.hyper_optimizer.load_state_dict(saved["hyper_optimizer"])
        self.best = BestEpoch.from_dict(saved["best"])
        self.history = list(saved["history"])
        return LoopState(**saved["loop"])

    def batch_loss(self, batch: Tensor) -> Tensor:
        """The penalised loss on the minibatch rows ``batch`` (the prior held fixed)."""
        batch = batch.to(self.images.device)
        precisions = tensor_precisions(laplace_prior(self.log_prior).detach(), self.network,
                                       self.settings, self.last_layer)
        loss = penalised_loss(self.network, self.images[batch].to(self.device),
                              self.labels[batch].to(self.device), precisions, self.n_data)
        self.objective_sum = self.objective_sum + loss.detach()
        self.n_batches += 1
        return loss

    def marglik_update(self, epoch: int) -> dict[str, Any]:
        """Refit the evidence around the current weights, take the hyper-steps, offer the
        epoch as the best; the history entry's values."""
        watch = Stopwatch()
        self.network.eval()
        objective = self.evidence(self.network, self.refit_loader,
                                  laplace_prior(self.log_prior).detach(), self.temperature,
                                  self.last_layer)
        refit_s = watch.elapsed()
        steps, prior = marglik_step(objective, self.log_prior, self.hyper_optimizer,
                                    self.settings.hyper_steps)
        self.network.train()
        improved = self.best.offer(epoch, steps[-1], self.network, prior)
        return {"neg_log_marglik": steps[-1], "prior_precision": prior.tolist(),
                "refit_s": refit_s, "hyper_s": watch.elapsed() - refit_s, "best": improved}

    def epoch_end(self, state: LoopState) -> None:
        """The marginal-likelihood update (on its epochs), the history entry, a checkpoint."""
        epoch = state.epochs_done
        values = self.marglik_update(epoch) if self.settings.is_marglik_epoch(epoch) else {}
        self.history.append({"epoch": epoch,
                             "objective": float(self.objective_sum) / max(self.n_batches, 1),
                             "lr": float(state.optimizer["param_groups"][0]["lr"]),
                             "seconds": time.perf_counter() - self.started, **values})
        self.objective_sum, self.n_batches = 0.0, 0
        self.checkpoints.save({"loop": asdict(state), "model": self.network.state_dict(),
                               "batch_rng": self.batches.get_state(),
                               "global_rng": global_rng_state(self.device),
                               "log_prior": self.log_prior.detach().clone(),
                               "hyper_optimizer": self.hyper_optimizer.state_dict(),
                               "best": self.best.to_dict(), "history": self.history})
        self.started = time.perf_counter()

    def result(self) -> OnlineMarglikResult:
        """Restore the best epoch (or keep the last weights and prior if no epoch had an
        update) and return the result; the network is left in eval mode."""
        if self.best.model is not None:
            self.network.load_state_dict(self.best.model)
            prior = self.best.prior_precision
        else:
            prior = laplace_prior(self.log_prior).detach().clone()
        self.network.eval()
        model = {k: v.detach().clone() for k, v in self.network.state_dict().items()}
        return OnlineMarglikResult(model, prior, self.best.epoch, self.best.neg_log_marglik,
                                   self.history)


def train_online_marglik(network: nn.Module, images: Tensor, labels: Tensor,
                         settings: OnlineMarglikSettings, evidence: Evidence,
                         streams: RunStreams, checkpoints: Checkpoints,
                         desc: str = "online marglik") -> OnlineMarglikResult:
    """Train ``network`` (in place, on its device) on ``images [N, ...]`` and integer
    ``labels [N]`` by online marginal likelihood (module docstring) with the caller's
    ``evidence``, resuming from the last checkpoint in ``checkpoints`` if there is one; the
    network ends with the best epoch's weights, in eval mode.

    History entries (one per epoch, 1-based ``epoch``): mean minibatch ``objective``, the
    ``lr`` the epoch ended with, wall ``seconds``; on update epochs also the last hyper-step's
    ``neg_log_marglik``, the ``prior_precision`` it was computed at, ``refit_s``, ``hyper_s``
    and whether the epoch became the ``best``."""
    settings.check()
    run = _Run(network, images, labels, settings, evidence, streams, checkpoints)
    saved = checkpoints.load()
    config = TrainingConfig(lr=settings.lr, max_epochs=settings.epochs,
                            batch_size=settings.batch_size, optimizer="adam",
                            schedule="cosine", schedule_unit="step", min_lr=settings.min_lr)
    with seeded_global_rng(streams.global_rng, run.device):
        resume = None if saved is None else run.restore(saved)
        network.train()
        fit_parameters(list(network.parameters()), run.batch_loss, n_rows=run.n_data,
                       config=config, generator=run.batches, desc=desc,
                       on_epoch_end=run.epoch_end, resume=resume)
    return run.result()
