"""What a method fits on: the training tensors, where they come from, where trained states go.

Every method of the contract (:mod:`bench.contracts.method`) that conditions on a labelled training
set receives a :class:`TrainingSet`. Methods that only fit curvature read the two tensors;
methods that train (ensembles, variational and sampling baselines, SWAG) also use the data's
identity (part of their stored-state recipe, :mod:`bench.harness.state_store`), the results
folder their trained states are stored under and the device to train on. ``augmentation``
names the random transform every training minibatch goes through
(:mod:`bench.datasets.augmentation`; Laplace Redux's CIFAR-10 crop and flip), which methods
apply through :meth:`TrainingSet.augmenter`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from torch import Tensor

from bench.datasets.augmentation import Augment, training_augmentation


@dataclass(frozen=True)
class TrainingSet:
    """Training inputs ``[N, ...]`` and targets ``[N]`` (class indices or regression values).

    ``name`` and ``preprocessing`` identify the data (e.g. ``mnist``, ``unit``);
    ``results_dir`` is where trained states are stored (None: the default results folder);
    ``device`` is where methods train; ``augmentation`` is the training-time augmentation
    (``none`` or ``crop_flip``; ``preprocessing`` must then name the inputs' normalisation).
    """

    train_inputs: Tensor
    train_labels: Tensor
    name: str = "custom"
    preprocessing: str = "none"
    results_dir: str | None = None
    device: str = "cpu"
    augmentation: str = "none"

    def identity(self) -> dict:
        """The data's identity for a stored-state recipe: name, preprocessing, input shape,
        number of training examples and, when there is one, the augmentation (left out when
        ``none``, so recipes made before augmentation existed keep their hashes)."""
        values = {"name": self.name, "preprocessing": self.preprocessing,
                  "image_shape": list(self.train_inputs.shape[1:]),
                  "train_size": len(self.train_inputs)}
        if self.augmentation != "none":
            values["augmentation"] = self.augmentation
        return values

    def content_sha256(self) -> str:
        """SHA-256 of the training inputs' and targets' float64 bytes (the data's content,
        which its name does not fix: the two-moons noise side runs share the name)."""
        digest = hashlib.sha256()
        for tensor in (self.train_inputs, self.train_labels):
            digest.update(tensor.detach().to("cpu").double().contiguous().numpy().tobytes())
        return digest.hexdigest()

    def augmenter(self) -> Augment | None:
        """``augment(batch, generator)`` for training minibatches, or None (no augmentation)."""
        return training_augmentation(self.augmentation, self.preprocessing)
