"""What a method fits on: the training tensors, where they come from, where trained states go.

Every method of the contract (:mod:`bench.methods.base`) that conditions on a labelled training
set receives a :class:`TrainingSet`. Methods that only fit curvature read the two tensors;
methods that train (ensembles, variational and sampling baselines, SWAG) also use the data's
identity (part of their stored-state recipe, :mod:`bench.training.state_store`), the results
folder their trained states are stored under and the device to train on.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True)
class TrainingSet:
    """Training inputs ``[N, ...]`` and targets ``[N]`` (class indices or regression values).

    ``name`` and ``preprocessing`` identify the data (e.g. ``mnist``, ``unit``);
    ``results_dir`` is where trained states are stored (None: the default results folder);
    ``device`` is where methods train.
    """

    train_inputs: Tensor
    train_labels: Tensor
    name: str = "custom"
    preprocessing: str = "none"
    results_dir: str | None = None
    device: str = "cpu"

    def identity(self) -> dict:
        """The data's identity for a stored-state recipe: name, preprocessing, input shape and
        number of training examples."""
        return {"name": self.name, "preprocessing": self.preprocessing,
                "image_shape": list(self.train_inputs.shape[1:]),
                "train_size": len(self.train_inputs)}
