"""What ``lightning.Trainer.fit`` does with early stopping on ``val_loss``, step for step, in the
project's loop (:func:`bench.training.loop.fit_parameters`) without the Trainer's per-step
machinery (logging, metric updates, hook dispatch).

The networks the SSLA authors trained under a Trainer (their base MLP, Lightning-UQ-Box's VI
baselines) are reproduced bit for bit only if every draw from the global torch RNG happens in
the Trainer's order. Per epoch, as Lightning 2.x runs it: one pass over the datamodule's train
``DataLoader`` (its iterator draws a base seed and its ``RandomSampler`` a shuffling seed, in that
order), each batch an optimizer step on the batch's loss (no gradient clipping, no
accumulation); then one pass over the val loader in eval mode (another base seed drawn), whose
``val_loss`` is Lightning's batch-size-weighted mean, accumulated as its ``_ResultMetric`` does
(float32 sum of loss x batch size, divided by the count). Early stopping as ``EarlyStopping``'s
defaults: stop once ``patience`` epochs in a row did not lower ``val_loss`` strictly (min_delta
0) or when it is not finite; the last epoch's weights are kept. Lightning's sanity-check
validation runs under ``isolate_rng`` and leaves nothing behind, so it is not repeated. Any Monte
Carlo draws the losses make (the VI baselines' weight samples, in training and validation steps)
then come in the same order too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from bench.training.loop import TrainingConfig, TrainingHistory, fit_parameters


@dataclass
class TrainerStandIn:
    """What a Lightning-UQ-Box module reads from its Trainer outside logging: the datamodule
    (``on_fit_start`` counts the training points from it) and the epoch running
    (``current_epoch``, e.g. the end of MFVI's MSE burn-in), which a Trainer counts from 0."""

    datamodule: Any
    current_epoch: int = 0


def fit_like_lightning(module: nn.Module, step_loss: Callable[[dict[str, Tensor]], Tensor],
                       datamodule, optimizer: torch.optim.Optimizer, *, max_epochs: int,
                       patience: int, desc: str, trainer: TrainerStandIn | None = None,
                       ) -> TrainingHistory:
    """Train ``module`` on ``step_loss(batch)`` as ``Trainer.fit`` with ``EarlyStopping(
    monitor="val_loss", patience)`` would (module docstring); ``step_loss`` is both the
    training step's loss and the validation step's ``val_loss``.

    ``trainer``: updated with the epoch running before its training batches (and left at the
    epochs completed at the end, as a Trainer's ``current_epoch``). Returns the loop's
    history: ``epochs`` is the Trainer's ``current_epoch`` after fit, ``last_validation`` its
    last ``val_loss`` and ``best_validation`` EarlyStopping's best score.
    """
    train_loader, val_loader = datamodule.train_dataloader(), datamodule.val_dataloader()
    epochs = itertools.count()

    def epoch_batches():
        epoch = next(epochs)
        if trainer is not None:
            trainer.current_epoch = epoch
        return train_loader

    def val_loss() -> Tensor:
        module.eval()
        total, count = torch.tensor(0.0), torch.tensor(0)
        for batch in val_loader:
            size = batch["input"].shape[0]
            total, count = total + step_loss(batch) * size, count + size
        module.train()
        return total / count

    module.train()
    config = TrainingConfig(lr=optimizer.param_groups[0]["lr"], max_epochs=max_epochs,
                            batch_size=datamodule.batch_size, patience=patience,
                            restore_best=False)
    history = fit_parameters(
        list(module.parameters()), step_loss, n_rows=len(train_loader.dataset),
        config=config, validation=val_loss, desc=desc, optimizer=optimizer,
        epoch_batches=epoch_batches)
    if trainer is not None:
        trainer.current_epoch = history.epochs
    return history


def stopped_early(history: TrainingHistory, patience: int) -> bool:
    """``bool(EarlyStopping.stopped_epoch)`` after the same training: whether early stopping
    fired (a non-finite ``val_loss`` or ``patience`` epochs without improvement), at an epoch
    other than the first (the callback records the 0-based epoch, so a stop at epoch 0 reads
    False)."""
    last = history.epochs - 1
    fired = (not math.isfinite(history.last_validation)
             or last - history.best_epoch >= patience)
    return fired and last > 0
