"""What the classification baselines that train their own networks from scratch share (BBB,
CSGHMC): their common fields and checks (:class:`ScratchClassifier`), config checks naming
``method.<key>``, the streams derived from the fit seed, and the per-epoch history of a run
(the network: :class:`bench.methods.settings.ModelSettings`).

Every random draw of a fit comes from the fit ``seed``: the network's initial weights from
:data:`bench.methods.settings.NETWORK_STREAM`, torch's global RNG (dropout, bayesian-torch's
layers) seeded from :data:`GLOBAL_STREAM`, the minibatch order from :data:`MINIBATCH_STREAM`
and sampler noise from :data:`NOISE_STREAM` (``derived_seed(seed, spawn_key=stream)``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from bench.harness.errors import ConfigError
from bench.harness.rng import derived_seed, global_rng_state, set_global_rng_state
from bench.methods.settings import ModelSettings, PredictionSettings, settings_node
from bench.training.loop import LoopState

GLOBAL_STREAM = (1,)
MINIBATCH_STREAM = (2,)
NOISE_STREAM = (3,)
# The initial variational posterior (bayesian-torch draws it from the global RNG).
POSTERIOR_INIT_STREAM = (4,)


def stream_seed(seed: int, stream: tuple[int, ...]) -> int:
    """The seed of one random stream of a fit with ``seed``."""
    return derived_seed(seed, spawn_key=stream)


def require_count(key: str, value: Any, minimum: int = 1) -> None:
    """An integer >= ``minimum``, else a one-line ConfigError naming ``method.<key>``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"method.{key}={value!r} is not valid; it must be an integer >= "
                          f"{minimum}")


@dataclass
class ScratchClassifier:
    """The fields a classifier that builds and trains its own network shares: its row
    ``name``, the network (``model``) for ``num_classes`` classes, trained in minibatches of
    ``batch_size`` on ``device``, predicting in chunks (``prediction``); checked once here
    (subclasses call ``super().__post_init__()``)."""

    name: str = "classifier"
    model: ModelSettings = ModelSettings()
    num_classes: int = 10
    batch_size: int = 512
    prediction: PredictionSettings = PredictionSettings(batch_size=1024)
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = False

    def __post_init__(self) -> None:
        self.model = settings_node(ModelSettings, self.model)
        self.prediction = settings_node(PredictionSettings, self.prediction)
        for key in ("num_classes", "batch_size"):
            require_count(key, getattr(self, key))


def require_real(key: str, value: Any, *, at_least: float | None = None,
                 above: float | None = None, at_most: float | None = None,
                 below: float | None = None) -> None:
    """A finite number within the given bounds, else a one-line ConfigError naming
    ``method.<key>``."""
    bounds = [(at_least, ">=", lambda v, b: v >= b), (above, ">", lambda v, b: v > b),
              (at_most, "<=", lambda v, b: v <= b), (below, "<", lambda v, b: v < b)]
    ok = (isinstance(value, int | float) and not isinstance(value, bool)
          and math.isfinite(value)
          and all(bound is None or holds(value, bound) for bound, _, holds in bounds))
    if not ok:
        limits = " and ".join(f"{sign} {bound}" for bound, sign, _ in bounds
                              if bound is not None)
        raise ConfigError(f"method.{key}={value!r} is not valid; it must be a finite number"
                          + (f" {limits}" if limits else ""))


class EpochLog:
    """The per-epoch history of a run: mean objective over the epoch's minibatches, the
    learning rate the epoch ended with, wall seconds, plus any values the method adds."""

    def __init__(self, history: list[dict]) -> None:
        self.history = history
        self.objective_sum: Tensor | None = None
        self.batches = 0
        self.started = time.perf_counter()

    def add(self, objective: Tensor) -> None:
        """Count one minibatch's objective (kept on its device until the epoch ends)."""
        value = objective.detach()
        self.objective_sum = value if self.objective_sum is None else self.objective_sum + value
        self.batches += 1

    def close_epoch(self, epoch: int, lr: float, **values: Any) -> None:
        """Append the entry of ``epoch`` and start timing the next one."""
        mean = (float("nan") if self.objective_sum is None
                else float(self.objective_sum) / self.batches)
        self.history.append({"epoch": epoch, "objective": mean, "lr": float(lr),
                             "seconds": time.perf_counter() - self.started, **values})
        self.objective_sum, self.batches = None, 0
        self.started = time.perf_counter()


def logged_batch_loss(images: Tensor, labels: Tensor, augment: Callable | None,
                      batches: torch.Generator, log: EpochLog,
                      objective: Callable[[Tensor, Tensor], Tensor]
                      ) -> Callable[[Tensor], Tensor]:
    """The training loop's loss of a minibatch of row indices: ``objective(x, y)`` of those
    rows of ``images`` (through ``augment`` with draws from ``batches``, when not None) and
    ``labels``, counted in ``log``."""

    def batch_loss(rows: Tensor) -> Tensor:
        rows = rows.to(images.device)
        x = images[rows] if augment is None else augment(images[rows], batches)
        loss = objective(x, labels[rows])
        log.add(loss)
        return loss

    return batch_loss


def training_tensors(data: Any, device: str) -> tuple[Tensor, Tensor]:
    """The training inputs and integer labels of ``data`` on ``device``."""
    return (data.train_inputs.to(device),
            data.train_labels.reshape(-1).to(device=device, dtype=torch.long))


def run_checkpoint(state: LoopState, network: nn.Module, device: str,
                   generators: dict[str, torch.Generator], **values: Any) -> dict:
    """What a run saves after an epoch: the loop's state, the network's weights, the state of
    each generator (checkpoint key -> generator), torch's global RNG on ``device`` and
    ``values``."""
    return {"loop": asdict(state), "model": network.state_dict(),
            **{key: generator.get_state() for key, generator in generators.items()},
            "global_rng": global_rng_state(device), **values}


def resume_run(saved: dict | None, network: nn.Module, device: str,
               generators: dict[str, torch.Generator]) -> LoopState | None:
    """Restore a run from its last checkpoint ``saved`` (:func:`run_checkpoint`; None: a fresh
    run) into ``network``, ``generators`` and torch's global RNG; the loop state to resume
    from."""
    if saved is None:
        return None
    network.load_state_dict(saved["model"])
    for key, generator in generators.items():
        generator.set_state(saved[key])
    set_global_rng_state(saved["global_rng"], device)
    return LoopState(**saved["loop"])
