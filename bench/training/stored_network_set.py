"""Several networks of one recipe (differing only by seed) from the trained-network store, the
missing ones trained together as one stacked network.

:func:`trained_networks` is :func:`bench.training.network_store.trained_network` for a list of
seeds: each network lives under exactly the folder (recipe hash, seed) the one-by-one path
uses, with the same files, so a store filled by either path serves the other. Networks already
stored are loaded and not trained. The rest are trained by
:func:`bench.training.stacked_classifier.train_classifiers_together` (same initial weights,
minibatches, augmentation draws, optimizer and schedule as one by one; equal within float
rounding), under the lock of every one of them, each checkpointed after every epoch in its
own ``seed-<seed>.partial`` folder. Members whose interrupted runs stand at different epochs
are trained in one stacked run per position. A recipe whose network is not stackable (batch
norm, dropout) or that starts from pretrained weights is trained one by one, as is a group of
one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

import torch
from torch import Tensor

from bench.datasets.augmentation import training_augmentation
from bench.harness.overrides import default_results_dir
from bench.harness.stored_files import exclusive_lock
from bench.training.classifier import ClassifierCheckpoint
from bench.training.network_store import (
    WEIGHTS_NAME,
    StoredNetwork,
    TrainingRecipe,
    batch_generator,
    check_training_data,
    dropout_seed,
    fresh_network,
    load_network,
    network_dir,
    publish_trained,
    save_checkpoint,
    saved_checkpoint,
    train_and_store,
    trained_network,
)
from bench.training.stacked_classifier import train_classifiers_together
from bench.training.stacked_networks import stackable


def trains_together(recipe: TrainingRecipe) -> bool:
    """Whether networks of ``recipe`` can train as one stacked network (fresh initial
    weights, no batch norm, no dropout)."""
    return recipe.pretrained is None and stackable(fresh_network(recipe, 0))


def trained_networks(recipe: TrainingRecipe, seeds: Sequence[int], train_images: Tensor,
                     train_labels: Tensor, results_dir: Path | str | None = None,
                     device: str | torch.device | None = None, *, together: bool = True,
                     on_epoch_end: Callable[[ClassifierCheckpoint], None] | None = None,
                     ) -> list[StoredNetwork]:
    """The networks of ``recipe`` trained from each of ``seeds`` (distinct), in that order:
    loaded when stored, else trained, together when ``together`` and the recipe allows it
    (:func:`trains_together`), else one by one. ``on_epoch_end`` sees every member's
    checkpoint after each epoch, after it is saved."""
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {list(seeds)}")
    results = default_results_dir() if results_dir is None else results_dir
    device = torch.device("cpu" if device is None else device)
    check_training_data(recipe, train_images, train_labels)
    if not together or len(seeds) < 2 or not trains_together(recipe):
        return [trained_network(recipe, seed, train_images, train_labels, results, device,
                                on_epoch_end=on_epoch_end) for seed in seeds]
    finals = {seed: network_dir(results, recipe, seed) for seed in seeds}
    networks = {seed: load_network(final, recipe, seed, device)
                for seed, final in finals.items() if (final / WEIGHTS_NAME).exists()}
    missing = sorted(seed for seed in seeds if seed not in networks)
    with ExitStack() as locks:
        for seed in missing:
            locks.enter_context(exclusive_lock(finals[seed].with_name(f"seed-{seed}.lock")))
        positions: dict[tuple, dict[int, ClassifierCheckpoint | None]] = {}
        for seed in missing:
            if (finals[seed] / WEIGHTS_NAME).exists():
                networks[seed] = load_network(finals[seed], recipe, seed, device)
                continue
            partial = finals[seed].with_name(f"seed-{seed}.partial")
            partial.mkdir(parents=True, exist_ok=True)
            checkpoint = saved_checkpoint(partial)
            position = () if checkpoint is None else (checkpoint.stage,
                                                      checkpoint.loop.epochs_done)
            positions.setdefault(position, {})[seed] = checkpoint
        for group in positions.values():
            if len(group) == 1:
                (seed,) = group
                networks[seed] = train_and_store(recipe, seed, train_images, train_labels,
                                                 finals[seed], device, on_epoch_end)
                continue
            networks |= _train_group(recipe, group, train_images, train_labels, finals, device,
                                     on_epoch_end)
    return [networks[seed] for seed in seeds]


def _train_group(recipe: TrainingRecipe, group: dict[int, ClassifierCheckpoint | None],
                 images: Tensor, labels: Tensor, finals: dict[int, Path], device: torch.device,
                 on_epoch_end: Callable[[ClassifierCheckpoint], None] | None
                 ) -> dict[int, StoredNetwork]:
    seeds = list(group)
    partials = [finals[seed].with_name(f"seed-{seed}.partial") for seed in seeds]
    checkpoints = list(group.values())
    resume = None if checkpoints[0] is None else checkpoints

    def checkpoint_epoch(members: list[ClassifierCheckpoint]) -> None:
        for partial, checkpoint in zip(partials, members, strict=True):
            save_checkpoint(partial, checkpoint)
        if on_epoch_end is not None:
            for checkpoint in members:
                on_epoch_end(checkpoint)

    modules = [fresh_network(recipe, seed).to(device) for seed in seeds]
    started = time.perf_counter()
    histories = train_classifiers_together(
        modules, images, labels, recipe.stages,
        generators=[batch_generator(seed) for seed in seeds],
        dropout_seeds=[dropout_seed(seed) for seed in seeds], on_epoch_end=checkpoint_epoch,
        resume=resume, desc=f"{recipe.model}/{recipe.dataset.name} seeds {seeds}",
        augment=training_augmentation(recipe.dataset.augmentation,
                                      recipe.dataset.preprocessing,
                                      "recipe.dataset.augmentation"))
    share = (time.perf_counter() - started) / len(seeds)
    return {seed: publish_trained(recipe, seed, module, history, finals[seed],
                                  {"seconds_this_run": share, "device": str(device),
                                   "kept_fresh": [], "trained_together_with": seeds})
            for seed, module, history in zip(seeds, modules, histories, strict=True)}
