"""What every laplace-torch classifier adapter shares (the post-hoc classifier, the marginal
likelihood helpers, online marglik, the last-layer checkpoint method): the curvature backends
by name, the attributes of a fitted Laplace object that are not its state and the unshuffled
training loader it is fitted on. Kept apart so that those modules import this one and not each
other.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from bench.harness.errors import require_choice

BACKENDS = ("AsdlGGN", "AsdlEF", "CurvlinopsGGN", "CurvlinopsEF", "BackPackGGN", "BackPackEF")
# Attributes of a fitted laplace-torch object that are not its state: ``data`` is the first
# training batch, which last-layer Laplace keeps only to find the last layer (laplace-torch 0.3).
NOT_STATE = ("data",)


class ClassificationTrainData(Protocol):
    """What a classification method fits on: training inputs and integer labels."""

    train_inputs: Tensor
    train_labels: Tensor


def train_loader(data: ClassificationTrainData, batch_size: int,
                 dtype: torch.dtype | None = None, inputs: Tensor | None = None) -> DataLoader:
    """An unshuffled loader over ``(train_inputs, train_labels)`` (inputs cast to ``dtype``);
    ``inputs`` replaces ``train_inputs`` (e.g. their augmented copy)."""
    inputs = data.train_inputs if inputs is None else inputs
    inputs = inputs if dtype is None else inputs.to(dtype)
    labels = data.train_labels.reshape(-1).long()
    return DataLoader(TensorDataset(inputs, labels), batch_size=batch_size)


def backend_class(name: str) -> type:
    """laplace-torch's curvature backend class called ``name`` (one of :data:`BACKENDS`)."""
    import laplace.curvature

    return getattr(laplace.curvature, require_choice("method.backend", name, BACKENDS))
