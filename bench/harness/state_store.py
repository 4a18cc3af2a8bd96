"""Trained method states (variational posteriors, sampler draws, SWAG moments), stored once per
(recipe, seed) and reused by every experiment that names the same recipe.

The companion of :mod:`bench.training.network_store` for methods whose training produces more
than one network's weights. A recipe is a plain JSON dict that decides the trained state except
for the seed (the method's training settings, the network recipe or hash it starts from, the
training data's identity); :func:`state_recipe_hash` is the SHA-256 of its canonical JSON. The
state lives in

    ``<results_dir>/states/<kind>/<dataset>/<recipe_hash>/seed-<seed>/``

(``state.pt``, a dict of tensors and plain values; ``recipe.json``; ``history.json``).
:func:`stored_state` loads it when it is there; otherwise it calls the method's ``train``
function with a :class:`Checkpoints` object for its ``seed-<seed>.partial/`` folder: ``train``
saves a checkpoint after every epoch and, when run again after an interruption, loads the last
one and continues from it. The finished folder is renamed to its final name in one step, under
an exclusive lock, so readers never see half a state.

Damaged files (:mod:`bench.harness.stored_files`): a finished folder (one with ``state.pt``)
whose ``state.pt`` or ``history.json`` cannot be read is a one-line
:class:`~bench.harness.stored_files.DamagedStoreFile` (a ConfigError) naming the file and the
folder to delete; it is neither used nor trained again silently. A ``checkpoint.pt`` of an
interrupted run that cannot be read is deleted with a warning and :meth:`Checkpoints.load`
returns None, so training starts from the first epoch. A folder without ``state.pt`` is trained
again and replaced by the new folder once training finishes.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench.harness.errors import ConfigError
from bench.harness.hashing import json_hash
from bench.harness.overrides import default_results_dir
from bench.harness.stored_files import (
    CHECKPOINT_NAME,
    HISTORY_NAME,
    exclusive_lock,
    load_checkpoint,
    load_stored_tensors,
    publish_stored,
    read_stored_json,
    save_atomically,
    stored_or_built,
)

logger = logging.getLogger("bench.training")

STATE_NAME = "state.pt"


def state_recipe_hash(recipe: dict) -> str:
    """First 12 hex digits of the SHA-256 of ``recipe``'s canonical JSON (sorted keys)."""
    try:
        return json_hash(recipe)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"a stored-state recipe must be plain JSON values: {error}") from None


def state_dir(results_dir: Path | str, kind: str, dataset: str, recipe: dict, seed: int) -> Path:
    """The folder that holds the state of method ``kind`` trained by ``recipe`` from ``seed``."""
    for key, value in (("kind", kind), ("dataset", dataset)):
        if not value or "/" in value:
            raise ConfigError(f"stored state {key}={value!r} is not valid; it must be a "
                              "non-empty name without '/'")
    return (Path(results_dir) / "states" / kind / dataset / state_recipe_hash(recipe)
            / f"seed-{seed}")


class Checkpoints:
    """The epoch checkpoints of one training run, kept in its ``.partial`` folder."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / CHECKPOINT_NAME

    def load(self) -> dict | None:
        """The last saved checkpoint (tensors on the CPU), or None for a fresh start (also
        when the checkpoint cannot be read: it is then deleted with a warning)."""
        saved = load_checkpoint(self.path)
        if saved is not None:
            logger.info("resuming from %s", self.path)
        return saved

    def save(self, values: dict) -> None:
        """Replace the checkpoint by ``values`` (tensors and plain values) atomically."""
        save_atomically(self.path, lambda f: torch.save(values, f))


@contextmanager
def resumable(kind: str, dataset: str, recipe: dict, seed: int,
              results_dir: Path | str) -> Iterator[Checkpoints]:
    """Checkpoints for a computation whose progress, not its result, is kept: the folder
    ``<state_dir>.partial/`` (:func:`state_dir`), held under its exclusive lock while the body
    runs and deleted when the body finishes, so an interrupted run continues from its last
    checkpoint and a finished one leaves nothing behind but the lock file."""
    final = state_dir(results_dir, kind, dataset, recipe, seed)
    partial = final.with_name(f"{final.name}.partial")
    with exclusive_lock(final.with_name(f"{final.name}.lock")):
        partial.mkdir(parents=True, exist_ok=True)
        yield Checkpoints(partial)
        shutil.rmtree(partial, ignore_errors=True)


@dataclass(frozen=True)
class StoredState:
    """A trained ``state`` (tensors on the CPU), its recipe hash, its folder, its per-epoch
    ``history`` and whether it was loaded (``reused``) rather than trained now."""

    state: dict[str, Any]
    recipe_hash: str
    path: Path
    history: list[dict]
    reused: bool


TrainFunction = Callable[[Checkpoints], tuple[dict[str, Any], list[dict]]]


def stored_state(kind: str, dataset: str, recipe: dict, seed: int, train: TrainFunction,
                 results_dir: Path | str | None = None) -> StoredState:
    """The state of method ``kind`` trained by ``recipe`` from ``seed`` on ``dataset``: loaded
    when stored, else ``train(checkpoints) -> (state, history)`` is run (resuming from its last
    checkpoint if an earlier run was interrupted) and its result saved."""
    final = state_dir(default_results_dir() if results_dir is None else results_dir, kind,
                      dataset, recipe, seed)
    expected = state_recipe_hash(recipe)

    def train_and_store(partial: Path) -> StoredState:
        checkpoints = Checkpoints(partial)
        started = time.perf_counter()
        state, history = train(checkpoints)
        state = {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v
                 for k, v in state.items()}
        publish_stored(partial, final, STATE_NAME, state, recipe, {
            "recipe_hash": expected, "seed": seed, "kind": kind,
            "torch": torch.__version__, "seconds_this_run": time.perf_counter() - started,
            "epochs": history})
        return StoredState(state, expected, final, history, reused=False)

    return stored_or_built(final, STATE_NAME, lambda path: load_state(path, expected),
                           train_and_store)


def load_state(path: Path, expected_hash: str | None = None) -> StoredState:
    """The stored state in ``path`` (a finished ``seed-<seed>`` folder); a state saved under
    another recipe hash than ``expected_hash`` is a one-line ConfigError naming its file, and
    so is a file of the folder that cannot be read
    (:class:`~bench.harness.stored_files.DamagedStoreFile`)."""
    saved = read_stored_json(path / HISTORY_NAME, ("recipe_hash", "epochs"))
    if expected_hash is not None and saved.get("recipe_hash") != expected_hash:
        raise ConfigError(f"{path / STATE_NAME}: saved under recipe hash "
                          f"{saved.get('recipe_hash')!r}, but its config gives {expected_hash!r}; "
                          "move the folder away to retrain")
    state = load_stored_tensors(path / STATE_NAME)
    return StoredState(state, saved["recipe_hash"], Path(path), saved["epochs"], reused=True)
