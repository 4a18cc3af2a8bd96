"""Minibatch cross-entropy training of an image classifier in stages, on the one training loop
(:func:`bench.training.loop.fit_parameters`).

Each :class:`TrainingStage` is one run of the loop with its own optimizer (Adam, AdamW or SGD
with momentum), learning rate, epochs, batch size, cosine or constant schedule and weight
decay, applied either by the optimizer or as the term ``(weight_decay / 2) ||theta||^2`` added
to the mean cross-entropy (``weight_decay_mode="objective"``). The network trains in train
mode (batch norm uses batch statistics, dropout is on) and is left in eval mode. Minibatches are
indexed on the images' device and moved to the network's device, then, when an ``augment``
function is given (:mod:`bench.datasets.augmentation`), augmented with draws from the minibatch
generator (so a checkpoint's generator state also restores the augmentation stream).

After every epoch ``on_epoch_end`` receives a :class:`ClassifierCheckpoint` (network, optimizer,
schedule, minibatch generator and dropout RNG states, stage and epoch); passing it back as
``resume`` continues bit for bit as if training had not stopped (on CPU).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bench.harness.errors import ConfigError, require_choice
from bench.training.loop import LoopState, TrainingConfig, fit_parameters
from bench.training.subnormal_weights import zero_subnormal_weights

STAGE_OPTIMIZERS = ("adam", "adamw", "sgd")
STAGE_SCHEDULES = ("none", "cosine")


def l2_penalty(parameters: Sequence[Tensor]) -> Tensor:
    """``||theta||^2`` over all ``parameters``."""
    return sum(p.pow(2).sum() for p in parameters)


class OptimizerWeightDecay:
    """``weight_decay_mode="optimizer"``: the optimizer applies the decay."""

    def optimizer_weight_decay(self, weight_decay: float) -> float:
        """The optimizer's ``weight_decay``: the stage's."""
        return weight_decay

    def objective(self, loss: Tensor, weight_decay: float, parameters: Sequence[Tensor]
                  ) -> Tensor:
        """The minibatch objective: the loss itself."""
        return loss


class ObjectiveWeightDecay:
    """``weight_decay_mode="objective"``: ``(weight_decay / 2) ||theta||^2`` joins the loss."""

    def optimizer_weight_decay(self, weight_decay: float) -> float:
        """The optimizer's ``weight_decay``: none."""
        return 0.0

    def objective(self, loss: Tensor, weight_decay: float, parameters: Sequence[Tensor]
                  ) -> Tensor:
        """The loss plus the L2 term (the loss alone when ``weight_decay`` is 0)."""
        if weight_decay > 0:
            return loss + 0.5 * weight_decay * l2_penalty(parameters)
        return loss


WEIGHT_DECAY_PLACEMENTS = {"optimizer": OptimizerWeightDecay(),
                           "objective": ObjectiveWeightDecay()}
WEIGHT_DECAY_MODES = tuple(WEIGHT_DECAY_PLACEMENTS)


@dataclass(frozen=True)
class TrainingStage:
    """One stage of a training recipe: ``epochs`` passes over the data in shuffled minibatches
    of ``batch_size`` with a fresh ``optimizer`` at ``lr``. ``schedule="cosine"`` anneals the
    learning rate per epoch to ``min_lr``; ``momentum`` and ``nesterov`` are SGD's.
    ``weight_decay_mode``: ``"optimizer"`` passes ``weight_decay`` to the optimizer,
    ``"objective"`` adds ``(weight_decay / 2) * ||theta||^2`` to the mean cross-entropy."""

    epochs: int
    lr: float
    batch_size: int
    optimizer: str = "adam"
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    weight_decay_mode: str = "optimizer"
    schedule: str = "none"
    min_lr: float = 0.0

    def __post_init__(self) -> None:
        for name in ("lr", "momentum", "weight_decay", "min_lr"):
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))

    def check(self, key: str = "stage") -> None:
        """Raise a one-line ConfigError naming ``key.<field>`` for the first bad value."""
        for name in ("epochs", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{key}.{name}={value!r} is not valid; it must be a positive "
                                  "integer")
        require_choice(f"{key}.optimizer", self.optimizer, STAGE_OPTIMIZERS)
        require_choice(f"{key}.schedule", self.schedule, STAGE_SCHEDULES)
        require_choice(f"{key}.weight_decay_mode", self.weight_decay_mode, WEIGHT_DECAY_MODES)
        if not isinstance(self.lr, float) or not math.isfinite(self.lr) or self.lr <= 0:
            raise ConfigError(f"{key}.lr={self.lr!r} is not valid; it must be a positive number")
        for name in ("momentum", "weight_decay", "min_lr"):
            value = getattr(self, name)
            if not isinstance(value, float) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{key}.{name}={value!r} is not valid; it must be a number "
                                  ">= 0")
        if self.momentum >= 1:
            raise ConfigError(f"{key}.momentum={self.momentum!r} is not valid; it must be < 1")
        if not isinstance(self.nesterov, bool):
            raise ConfigError(f"{key}.nesterov={self.nesterov!r} is not valid; true or false")
        if self.optimizer != "sgd" and (self.momentum or self.nesterov):
            raise ConfigError(f"{key}.momentum={self.momentum!r} is not valid with "
                              f"optimizer={self.optimizer!r}; momentum is SGD's")
        if self.nesterov and self.momentum == 0:
            raise ConfigError(f"{key}.nesterov=True is not valid with momentum=0.0")

    def loop_config(self) -> TrainingConfig:
        """The training-loop settings of this stage."""
        decay = WEIGHT_DECAY_PLACEMENTS[self.weight_decay_mode].optimizer_weight_decay(
            self.weight_decay)
        return TrainingConfig(lr=self.lr, max_epochs=self.epochs, batch_size=self.batch_size,
                              optimizer=self.optimizer, weight_decay=decay,
                              schedule=self.schedule, min_lr=self.min_lr,
                              momentum=self.momentum, nesterov=self.nesterov)

    def to_dict(self) -> dict:
        """The stage as a JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict, key: str = "stage") -> TrainingStage:
        """The stage of a dict such as :meth:`to_dict` writes; unknown keys are ConfigErrors."""
        known = {f.name for f in fields(cls)}
        for name in values:
            if name not in known:
                raise ConfigError(f"{key}.{name} is not a stage field; fields: "
                                  f"{', '.join(sorted(known))}")
        missing = [f.name for f in fields(cls) if f.name in ("epochs", "lr", "batch_size")
                   and f.name not in values]
        if missing:
            raise ConfigError(f"{key}.{missing[0]} is missing")
        return cls(**values)


@dataclass(frozen=True)
class ClassifierCheckpoint:
    """Training state after ``loop.epochs_done`` epochs of stage ``stage``: the network's
    ``state_dict``, the loop's optimizer and schedule state, the minibatch generator's state,
    the dropout RNG state (torch's CPU RNG, and the CUDA one on a GPU) and the history so far.
    Its tensors are the live training state: save or copy it inside the callback."""

    stage: int
    loop: LoopState
    model: dict
    batch_rng: Tensor
    dropout_rng: Tensor
    dropout_cuda_rng: Tensor | None
    history: list[dict]

    def to_dict(self) -> dict:
        """Plain containers of tensors and numbers (for ``torch.save(weights_only=True)``)."""
        values = asdict(self.loop)
        return {"stage": self.stage, "loop": values, "model": self.model,
                "batch_rng": self.batch_rng, "dropout_rng": self.dropout_rng,
                "dropout_cuda_rng": self.dropout_cuda_rng, "history": self.history}

    @classmethod
    def from_dict(cls, values: dict) -> ClassifierCheckpoint:
        """The checkpoint :meth:`to_dict` wrote."""
        return cls(values["stage"], LoopState(**values["loop"]), values["model"],
                   values["batch_rng"], values["dropout_rng"], values["dropout_cuda_rng"],
                   values["history"])


class _StageRun:
    """The loss closure and the epoch hook of one stage: mean cross-entropy (plus the L2 term
    when the stage puts weight decay in the objective), and one history entry per epoch."""

    def __init__(self, module: nn.Module, images: Tensor, labels: Tensor, stage: TrainingStage,
                 index: int, lr: float, history: list[dict],
                 report: Callable[[int, LoopState], None],
                 augment: Callable[[Tensor], Tensor] | None = None) -> None:
        self.module, self.images, self.labels = module, images, labels
        self.augment = augment
        self.stage, self.index, self.lr, self.history, self.report = (stage, index, lr, history,
                                                                      report)
        self.parameters = list(module.parameters())
        self.device = self.parameters[0].device
        self.decay_placement = WEIGHT_DECAY_PLACEMENTS[stage.weight_decay_mode]
        self.objective_sum = torch.zeros((), device=self.device)
        self.batches = 0
        self.started = time.perf_counter()

    def batch_loss(self, rows: Tensor) -> Tensor:
        """The stage's objective on the minibatch ``rows`` (after the last step's subnormal
        weights are set to zero, :mod:`bench.training.subnormal_weights`)."""
        zero_subnormal_weights(self.parameters)
        x = self.images[rows].to(self.device, non_blocking=True)
        y = self.labels[rows].to(self.device, non_blocking=True)
        if self.augment is not None:
            x = self.augment(x)
        loss = F.cross_entropy(self.module(x), y)
        loss = self.decay_placement.objective(loss, self.stage.weight_decay, self.parameters)
        self.objective_sum += loss.detach()
        self.batches += 1
        return loss

    def epoch_end(self, state: LoopState) -> None:
        """Append the epoch's history entry, then report the state for checkpointing (its
        subnormal weights set to zero first)."""
        zero_subnormal_weights(self.parameters)
        self.history.append({"stage": self.index, "epoch": state.epochs_done - 1,
                             "objective": float(self.objective_sum) / max(self.batches, 1),
                             "lr": self.lr, "seconds": time.perf_counter() - self.started})
        self.objective_sum.zero_()
        self.batches = 0
        self.lr = state.optimizer["param_groups"][0]["lr"]
        self.report(self.index, state)
        self.started = time.perf_counter()


def train_classifier(module: nn.Module, images: Tensor, labels: Tensor,
                     stages: Sequence[TrainingStage], *, generator: torch.Generator,
                     dropout_seed: int,
                     on_epoch_end: Callable[[ClassifierCheckpoint], None] | None = None,
                     resume: ClassifierCheckpoint | None = None,
                     desc: str = "training",
                     augment: Callable[[Tensor, torch.Generator], Tensor] | None = None
                     ) -> list[dict]:
    """Train ``module`` on ``images [N, C, H, W]`` and integer ``labels [N]`` by ``stages``.

    The CPU ``generator`` draws the minibatch order and, with ``augment(batch, generator)``,
    each minibatch's augmentation (after the epoch's order). Dropout draws from torch's global
    RNG, so training runs inside ``torch.random.fork_rng`` seeded with ``dropout_seed`` (the
    caller's RNG state is restored afterwards). Returns the history: one dict per epoch with
    ``stage``, ``epoch`` (within the stage), ``objective`` (mean over minibatches, the L2 term
    included when the stage adds it), ``lr`` (the epoch's learning rate) and ``seconds``.
    """
    for i, stage in enumerate(stages):
        stage.check(f"stages[{i}]")
    device = next(module.parameters()).device
    history = [] if resume is None else list(resume.history)
    cuda = device.type == "cuda"

    def report(index: int, state: LoopState) -> None:
        if on_epoch_end is not None:
            on_epoch_end(ClassifierCheckpoint(
                index, state, module.state_dict(), generator.get_state(), torch.get_rng_state(),
                torch.cuda.get_rng_state(device) if cuda else None, list(history)))

    cuda_devices = [torch.device(device).index or 0] if cuda else []
    with torch.random.fork_rng(devices=cuda_devices):
        if resume is None:
            torch.default_generator.manual_seed(dropout_seed)
            if cuda:
                with torch.cuda.device(device):
                    torch.cuda.manual_seed(dropout_seed)
        else:
            module.load_state_dict(resume.model)
            generator.set_state(resume.batch_rng)
            torch.set_rng_state(resume.dropout_rng)
            if cuda and resume.dropout_cuda_rng is not None:
                torch.cuda.set_rng_state(resume.dropout_cuda_rng, device)
        module.train()
        for index in range(0 if resume is None else resume.stage, len(stages)):
            stage = stages[index]
            loop_resume = resume.loop if resume is not None and index == resume.stage else None
            if loop_resume is not None and loop_resume.epochs_done >= stage.epochs:
                continue
            lr = stage.lr if loop_resume is None else loop_resume.optimizer["param_groups"][0]["lr"]
            run = _StageRun(module, images, labels, stage, index, lr, history, report,
                            None if augment is None else lambda x: augment(x, generator))
            fit_parameters(run.parameters, run.batch_loss, n_rows=len(labels),
                           config=stage.loop_config(), generator=generator,
                           desc=f"{desc} stage {index + 1}/{len(stages)}",
                           on_epoch_end=run.epoch_end, resume=loop_resume)
    module.eval()
    return history
