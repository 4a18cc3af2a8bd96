"""Several classifiers of one recipe trained together as one stacked network, the same training
as :func:`bench.training.classifier.train_classifier` run on each of them.

The members' parameters are stacked (:class:`bench.training.stacked_networks.StackedNetworks`)
and the loop (:func:`bench.training.loop.fit_parameters`) minimises the sum of the members'
objectives: member ``k``'s objective depends on its own slice only, so the gradient of the sum
is each member's own gradient, and Adam, AdamW and SGD update elementwise with one learning
rate and step count shared by all, so one optimizer step on the stack is every member's own
step. Each member keeps its own minibatch generator: every epoch each member draws its own
``randperm`` and, with an ``augment``, its own augmentation of each of its minibatches, in the
order :func:`train_classifier` draws them. The result equals the one-by-one training within
float rounding (the summation order of the batched kernels differs), tested.

Checkpoints are per member and in :class:`ClassifierCheckpoint`'s format (the member's slice of
the parameters and of the optimizer state, its generator state, the dropout RNG state the
one-by-one path would have), so either path resumes what the other saved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bench.harness.rng import make_generator
from bench.training.classifier import ClassifierCheckpoint, TrainingStage
from bench.training.loop import LoopState, fit_parameters
from bench.training.stacked_networks import StackedNetworks
from bench.training.subnormal_weights import zero_subnormal_weights

MemberAugment = Callable[[Tensor, torch.Generator], Tensor]
# Optimizer state entries shared by all members (the others are per parameter element).
SHARED_STATE_KEYS = ("step",)


def member_optimizer_state(state: dict, k: int) -> dict:
    """Member ``k``'s optimizer state dict from the stacked one: every per-parameter tensor
    (Adam's moments, SGD's momentum buffer) sliced and copied; the shared step count and the
    parameter groups kept."""
    def member(key: str, value):
        if not isinstance(value, Tensor):
            return value
        return value.clone() if key in SHARED_STATE_KEYS else value[k].clone()

    return {"state": {i: {key: member(key, value) for key, value in entries.items()}
                      for i, entries in state["state"].items()},
            "param_groups": [dict(group) for group in state["param_groups"]]}


def stacked_optimizer_state(states: Sequence[dict]) -> dict:
    """The stacked optimizer state of the members' ``states`` (the inverse of
    :func:`member_optimizer_state`; the members' step counts are equal)."""
    def stacked(i: int, key: str):
        values = [state["state"][i][key] for state in states]
        if not isinstance(values[0], Tensor) or key in SHARED_STATE_KEYS:
            return values[0]
        return torch.stack(values)

    first = states[0]
    return {"state": {i: {key: stacked(i, key) for key in entries}
                      for i, entries in first["state"].items()},
            "param_groups": first["param_groups"]}


class _StackedStageRun:
    """The loss closure, minibatch order and epoch hook of one stage for all members."""

    def __init__(self, stacked: StackedNetworks, images: Tensor, labels: Tensor,
                 stage: TrainingStage, index: int, lr: float,
                 generators: Sequence[torch.Generator], histories: list[list[dict]],
                 report: Callable[[int, LoopState], None],
                 augment: MemberAugment | None) -> None:
        self.stacked, self.images, self.labels = stacked, images, labels
        self.stage, self.index, self.lr = stage, index, lr
        self.generators, self.histories, self.report = generators, histories, report
        self.augment = augment
        self.device = stacked.parameters[0].device
        self.objective_sum = torch.zeros(stacked.members, device=self.device)
        self.batches = 0
        self.started = time.perf_counter()

    def epoch_rows(self) -> list[Tensor]:
        """This epoch's minibatches ``[K, b]``: each member's own shuffled order."""
        orders = [torch.randperm(len(self.labels), generator=g).split(self.stage.batch_size)
                  for g in self.generators]
        return [torch.stack(chunks) for chunks in zip(*orders, strict=True)]

    def batch_loss(self, rows: Tensor) -> Tensor:
        """The sum over members of each member's objective on its minibatch ``rows[k]`` (after
        the last step's subnormal weights are set to zero, as one member's training does)."""
        zero_subnormal_weights(self.stacked.parameters)
        x = self.images[rows].to(self.device, non_blocking=True)
        y = self.labels[rows].to(self.device, non_blocking=True)
        if self.augment is not None:
            x = torch.stack([self.augment(x[k], g) for k, g in enumerate(self.generators)])
        logits = self.stacked.logits(x)
        members, batch = y.shape
        losses = F.cross_entropy(logits.reshape(members * batch, -1), y.reshape(-1),
                                 reduction="none").view(members, batch).mean(1)
        if self.stage.weight_decay_mode == "objective" and self.stage.weight_decay > 0:
            squares = sum(p.pow(2).flatten(1).sum(1) for p in self.stacked.parameters)
            losses = losses + 0.5 * self.stage.weight_decay * squares
        self.objective_sum += losses.detach()
        self.batches += 1
        return losses.sum()

    def epoch_end(self, state: LoopState) -> None:
        """Append each member's history entry, then report the state for checkpointing (its
        subnormal weights set to zero first)."""
        zero_subnormal_weights(self.stacked.parameters)
        seconds = (time.perf_counter() - self.started) / self.stacked.members
        objectives = [float(total) / max(self.batches, 1) for total in self.objective_sum]
        for history, objective in zip(self.histories, objectives, strict=True):
            history.append({"stage": self.index, "epoch": state.epochs_done - 1,
                            "objective": objective, "lr": self.lr, "seconds": seconds})
        self.objective_sum.zero_()
        self.batches = 0
        self.lr = state.optimizer["param_groups"][0]["lr"]
        self.report(self.index, state)
        self.started = time.perf_counter()


def train_classifiers_together(modules: Sequence[nn.Module], images: Tensor, labels: Tensor,
                               stages: Sequence[TrainingStage], *,
                               generators: Sequence[torch.Generator],
                               dropout_seeds: Sequence[int],
                               on_epoch_end: Callable[[list[ClassifierCheckpoint]], None]
                               | None = None,
                               resume: Sequence[ClassifierCheckpoint] | None = None,
                               desc: str = "training together",
                               augment: MemberAugment | None = None) -> list[list[dict]]:
    """Train every network of ``modules`` (one architecture, :func:`stackable`, on one
    device) on ``images`` / ``labels`` by ``stages``, as :func:`train_classifier` trains each
    with its own minibatch ``generators[k]`` and ``dropout_seeds[k]``; the modules end with
    their trained weights, in eval mode.

    ``on_epoch_end(checkpoints)`` receives one :class:`ClassifierCheckpoint` per member after
    every epoch; ``resume`` (one per member, all at the same stage and epoch) continues from
    them. Returns each member's history (the entries of :func:`train_classifier`; ``seconds``
    is the member's share of the epoch's time).
    """
    for i, stage in enumerate(stages):
        stage.check(f"stages[{i}]")
    if len(generators) != len(modules) or len(dropout_seeds) != len(modules):
        raise ValueError("one generator and one dropout seed per member")
    device = next(modules[0].parameters()).device
    stacked = StackedNetworks([m.to("cpu") for m in modules]).to(device)
    dropout_states = [make_generator(seed).get_state() for seed in dropout_seeds]
    histories: list[list[dict]] = [[] for _ in modules]
    if resume is not None:
        if len({(c.stage, c.loop.epochs_done) for c in resume}) != 1:
            raise ValueError("members resumed together must stand at the same stage and epoch")
        stacked.load_member_states([c.model for c in resume])
        for generator, checkpoint in zip(generators, resume, strict=True):
            generator.set_state(checkpoint.batch_rng)
        histories = [list(c.history) for c in resume]

    def report(index: int, state: LoopState) -> None:
        if on_epoch_end is None:
            return
        on_epoch_end([ClassifierCheckpoint(
            index, LoopState(state.epochs_done, member_optimizer_state(state.optimizer, k),
                             state.scheduler),
            stacked.member_state(k), generators[k].get_state(), dropout_states[k], None,
            list(histories[k])) for k in range(len(modules))])

    for index in range(0 if resume is None else resume[0].stage, len(stages)):
        stage = stages[index]
        loop_resume = None
        if resume is not None and index == resume[0].stage:
            loop_resume = LoopState(resume[0].loop.epochs_done,
                                    stacked_optimizer_state([c.loop.optimizer for c in resume]),
                                    resume[0].loop.scheduler)
            if loop_resume.epochs_done >= stage.epochs:
                continue
        lr = stage.lr if loop_resume is None else loop_resume.optimizer["param_groups"][0]["lr"]
        run = _StackedStageRun(stacked, images, labels, stage, index, lr, generators, histories,
                               report, augment)
        fit_parameters(stacked.parameters, run.batch_loss, n_rows=len(labels),
                       config=stage.loop_config(), desc=f"{desc} stage {index + 1}/{len(stages)}",
                       on_epoch_end=run.epoch_end, resume=loop_resume,
                       epoch_batches=run.epoch_rows)
    for k, module in enumerate(modules):
        module.load_state_dict(stacked.member_state(k))
        module.to(device).eval()
    return histories
