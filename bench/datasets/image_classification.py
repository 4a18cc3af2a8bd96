"""The dataset config node of image classification experiments (``conf/dataset/<name>.yaml``).

:class:`ImageClassificationData` names an in-distribution set and OOD test sets from
:data:`bench.datasets.vision.IMAGE_SOURCES`. Building it checks the keys and that the files
exist (no reading), so missing data stops a run before it starts; tensors are loaded by its
methods and cached in the process.

Splits. ``val_size > 0`` reproduces Laplace Redux's split of the test set:
``torch.utils.data.random_split(test, [val_size, N - val_size],
generator=torch.Generator().manual_seed(split_seed))`` (2000 / 8000 with seed 42 on the 10k
MNIST, Fashion-MNIST or CIFAR-10 test sets); ``val_size=0`` keeps the whole test set in order
(the Generalized Laplace paper). ``n_train`` / ``n_test`` optionally cut the training set, the
test part and every OOD set to random subsets for small scales, drawn from generators derived
from the ``seed`` the methods take (train, test and each OOD set from their own stream).

Normalisation per set. ``normalisation`` applies to the in-distribution images; an OOD set
named in ``ood_normalisation`` uses its own (Laplace Redux's CIFAR-10 OOD loaders: SVHN with
SVHN statistics, LSUN unnormalised, CIFAR-100 with another std; notes section 4).

Augmentation. ``augmentation`` (``none`` or ``crop_flip``, :mod:`bench.datasets.augmentation`)
is what every training minibatch goes through; it is part of the training data's identity
(trained networks and method states) and is applied by the methods, never to the stored
tensors.

Optional OOD sets. A name in ``optional_ood`` (also listed in ``ood``) may have no files: the
node builds, :attr:`ImageClassificationData.available_ood` leaves it out and
:meth:`~ImageClassificationData.missing_ood` names its files and folder (Laplace Redux's EMNIST
column, not in the offline data). The in-distribution set and every other OOD set must exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.utils.data import random_split

from bench.datasets.augmentation import training_augmentation
from bench.datasets.image_transforms import normalisation, rotate_images, to_float
from bench.datasets.vision import (
    CIFAR10_C_CORRUPTIONS,
    IMAGE_SOURCES,
    image_files_obtainable,
    load_images,
    missing_files_message,
    require_image_files,
)
from bench.harness.errors import ConfigError, require_choice
from bench.harness.rng import derived_seed, make_generator

TRAIN_STREAM, TEST_STREAM, FIRST_OOD_STREAM = 0, 1, 2
SET_CHOICES = [name for name in IMAGE_SOURCES if name != "cifar10_c"]
# In-distribution sets need a training split (LSUN's classroom_val is a test set only).
IN_DISTRIBUTION_CHOICES = [name for name in SET_CHOICES if "train" in IMAGE_SOURCES[name].files]


class ImageTensors(NamedTuple):
    """Float images ``[N, C, H, W]`` and int64 labels ``[N]``."""

    x: Tensor
    y: Tensor


@dataclass(frozen=True)
class ImageSplits:
    """Train / validation / test tensors; ``*_indices`` index the full train or test split."""

    x_train: Tensor
    y_train: Tensor
    x_val: Tensor
    y_val: Tensor
    x_test: Tensor
    y_test: Tensor
    train_indices: Tensor
    val_indices: Tensor
    test_indices: Tensor


def _optional_count(key: str, value: Any, most: int) -> int | None:
    """None, or a positive integer at most ``most``; a one-line ConfigError otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= most:
        raise ConfigError(f"{key}={value!r} is not valid; it must be null (all) or an integer "
                          f"in 1..{most}")
    return value


def _subset(indices: Tensor, limit: int | None, generator: torch.Generator) -> Tensor:
    """``indices`` itself, or ``limit`` of them drawn without replacement, in sorted order."""
    if limit is None or limit >= len(indices):
        return indices
    chosen = torch.randperm(len(indices), generator=generator)[:limit]
    return indices[chosen.sort().values]


def redux_test_split(n_test: int, val_size: int, seed: int = 42) -> tuple[Tensor, Tensor]:
    """(validation, test) indices of Laplace Redux's ``random_split`` of ``range(n_test)``."""
    if val_size == 0:
        return torch.zeros(0, dtype=torch.long), torch.arange(n_test)
    val, test = random_split(range(n_test), [val_size, n_test - val_size],
                             generator=torch.Generator().manual_seed(seed))
    return torch.tensor(val.indices, dtype=torch.long), torch.tensor(test.indices,
                                                                     dtype=torch.long)


@dataclass
class ImageClassificationData:
    """An in-distribution image set with named OOD test sets, for classification experiments.

    ``images``: the in-distribution set (a key of ``IMAGE_SOURCES``); ``ood``: OOD test sets;
    ``normalisation``: a key of ``image_transforms.NORMALISATIONS`` for the in-distribution
    data; ``ood_normalisation``: per OOD set, where it differs (Laplace Redux: SVHN, LSUN
    and CIFAR-100 use their own; sets not in ``ood`` are ignored, so an experiment that
    drops OOD sets may keep the map); ``augmentation``: of training minibatches (module
    docstring); ``val_size``, ``split_seed``, ``n_train``, ``n_test``: module docstring;
    ``download``: let torchvision fetch missing files (else they must be present);
    ``root``: data root (default ``$BENCH_DATA_DIR``); ``device``: where tensors are put;
    ``optional_ood``: OOD sets that may be absent (module docstring).
    """

    name: str
    images: str
    ood: Sequence[str] = ()
    normalisation: str = "unit"
    ood_normalisation: Mapping[str, str] = field(default_factory=dict)
    val_size: int = 0
    split_seed: int = 42
    n_train: int | None = None
    n_test: int | None = None
    download: bool = False
    root: str | None = None
    device: str = "cpu"
    optional_ood: Sequence[str] = ()
    augmentation: str = "none"
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        source = IMAGE_SOURCES[require_choice("dataset.images", self.images,
                                              IN_DISTRIBUTION_CHOICES)]
        self.ood = tuple(self.ood)
        self.ood_normalisation = dict(self.ood_normalisation)
        for name in self.ood:
            require_choice("dataset.ood", name, SET_CHOICES)
            if IMAGE_SOURCES[name].shape != source.shape:
                raise ConfigError(f"dataset.ood={name!r} has images of shape "
                                  f"{IMAGE_SOURCES[name].shape}, {self.images!r} "
                                  f"{source.shape}; choose sets of the same shape")
        self.optional_ood = tuple(self.optional_ood)
        for name in self.optional_ood:
            require_choice("dataset.optional_ood", name, self.ood)
        normalisation(self.normalisation)
        for name, norm in self.ood_normalisation.items():
            require_choice("dataset.ood_normalisation", name, SET_CHOICES)
            normalisation(norm, f"dataset.ood_normalisation.{name}")
        training_augmentation(self.augmentation, self.normalisation)
        n_test = source.sizes["test"]
        if isinstance(self.val_size, bool) or not isinstance(self.val_size, int) \
                or not 0 <= self.val_size < n_test:
            raise ConfigError(f"dataset.val_size={self.val_size!r} is not valid; it must be an "
                              f"integer in 0..{n_test - 1} ({self.images} has {n_test} test "
                              "images; Laplace Redux uses 2000)")
        _optional_count("dataset.n_train", self.n_train, source.sizes["train"])
        _optional_count("dataset.n_test", self.n_test, n_test)
        self._check_files()

    def _check_files(self) -> None:
        """Stop with one line when a needed file is absent (and cannot be downloaded)."""
        require_image_files({self.images: ["train", "test"],
                             **{name: ["test"] for name in self.ood
                                if name not in self.optional_ood}}, self.root, self.download)

    def _obtainable(self, name: str, splits: Sequence[str]) -> bool:
        """Whether the files of ``name``'s ``splits`` are here (or may be downloaded)."""
        return image_files_obtainable(name, splits, self.root, self.download)

    @property
    def available_ood(self) -> tuple[str, ...]:
        """The OOD sets of ``ood`` that can be loaded: all but the absent optional ones."""
        return tuple(name for name in self.ood
                     if name not in self.optional_ood or self._obtainable(name, ["test"]))

    def missing_ood(self) -> dict[str, str]:
        """Absent optional OOD sets: name -> one line naming the files and their folder."""
        return {name: missing_files_message(name, "test", self.root)
                for name in self.ood if name not in self.available_ood}

    @property
    def num_classes(self) -> int:
        """Number of classes of the in-distribution set."""
        return IMAGE_SOURCES[self.images].num_classes

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """One image's ``(C, H, W)``."""
        return IMAGE_SOURCES[self.images].shape

    def _load(self, name: str, split: str, **options):
        return load_images(name, split, self.root, download=self.download, **options)

    def _stream(self, seed: int, stream: int) -> torch.Generator:
        return make_generator(derived_seed(int(seed), spawn_key=(stream,)))

    def _float(self, images: Tensor, norm: str) -> Tensor:
        return to_float(images, norm, self.device)

    def test_indices(self, seed: int = 0) -> tuple[Tensor, Tensor]:
        """(validation, test) indices into the full test split, after the ``n_test`` cut."""
        n_test = len(self._load(self.images, "test"))
        if self.val_size >= n_test:
            raise ConfigError(f"dataset.val_size={self.val_size} is not below the {n_test} "
                              f"test images of {self.images!r}")
        val, test = redux_test_split(n_test, self.val_size, self.split_seed)
        return val, _subset(test, self.n_test, self._stream(seed, TEST_STREAM))

    def splits(self, seed: int = 0) -> ImageSplits:
        """Float train / validation / test tensors (subsets drawn from ``seed``), cached."""
        key = ("splits", seed)
        if key not in self._cache:
            train, test = self._load(self.images, "train"), self._load(self.images, "test")
            train_idx = _subset(torch.arange(len(train)), self.n_train,
                                self._stream(seed, TRAIN_STREAM))
            val_idx, test_idx = self.test_indices(seed)
            labels = {"train": train.labels.to(self.device), "test": test.labels.to(self.device)}
            self._cache[key] = ImageSplits(
                self._float(train.images[train_idx], self.normalisation),
                labels["train"][train_idx.to(self.device)],
                self._float(test.images[val_idx], self.normalisation),
                labels["test"][val_idx.to(self.device)],
                self._float(test.images[test_idx], self.normalisation),
                labels["test"][test_idx.to(self.device)],
                train_idx, val_idx, test_idx)
        return self._cache[key]

    def ood_set(self, name: str, seed: int = 0) -> ImageTensors:
        """OOD test set ``name`` (one of ``ood``) with its normalisation, cut to ``n_test``."""
        require_choice("ood set", name, self.ood)
        key = ("ood", name, seed)
        if key not in self._cache:
            data = self._load(name, "test")
            stream = FIRST_OOD_STREAM + self.ood.index(name)
            chosen = _subset(torch.arange(len(data)), self.n_test, self._stream(seed, stream))
            norm = self.ood_normalisation.get(name, self.normalisation)
            self._cache[key] = ImageTensors(self._float(data.images[chosen], norm),
                                            data.labels[chosen].to(self.device))
        return self._cache[key]

    def corrupted_mixture(self, severity: int, corruptions: Sequence[str], n_draws: int,
                          generator: torch.Generator, seed: int = 0) -> ImageTensors:
        """``n_draws`` images drawn with replacement from the pool of every ``corruptions``
        array's test part at ``severity`` (Laplace Redux's CIFAR-10-C: one merged array per
        severity, 10,000 draws); severity 0 draws from the clean test part. The draw is one
        ``torch.randint`` over the pool (corruption-major order) from ``generator``; images
        come back in the order drawn."""
        require_choice("dataset.images", self.images, ["cifar10"])
        names = [require_choice("corruptions", c, CIFAR10_C_CORRUPTIONS) for c in corruptions]
        if not names:
            raise ConfigError("corruptions is empty; name at least one CIFAR-10-C corruption")
        _, test_idx = self.test_indices(seed)
        n = len(test_idx)
        pools = [None] if severity == 0 else names
        drawn = torch.randint(len(pools) * n, (n_draws,), generator=generator)
        images, labels, positions = [], [], []
        for k, corruption in enumerate(pools):
            chosen = ((drawn // n) == k).nonzero().squeeze(1)
            data = (self._load(self.images, "test") if corruption is None else
                    self._load("cifar10_c", "test", corruption=corruption, severity=severity))
            rows = test_idx[drawn[chosen] % n]
            images.append(data.images[rows])
            labels.append(data.labels[rows])
            positions.append(chosen)
        order = torch.cat(positions).argsort()
        return ImageTensors(self._float(torch.cat(images)[order], self.normalisation),
                            torch.cat(labels)[order].to(self.device))

    def rotated_test(self, angle: float, seed: int = 0) -> ImageTensors:
        """The test part rotated ``angle`` degrees counter-clockwise: R-MNIST at the angles
        ``ROTATION_ANGLES`` (Laplace Redux rotates before its split, so every angle sees the
        same test images, as here)."""
        test = self._load(self.images, "test")
        _, test_idx = self.test_indices(seed)
        turned = rotate_images(test.images[test_idx], angle)
        return ImageTensors(self._float(turned, self.normalisation),
                            test.labels[test_idx].to(self.device))

    def corrupted_test(self, corruption: str, severity: int, seed: int = 0) -> ImageTensors:
        """CIFAR-10-C images of the test part (same indices as the clean test part: the
        corrupted arrays keep CIFAR-10's test order); severity 0 is the clean test part."""
        require_choice("dataset.images", self.images, ["cifar10"])
        require_choice("corruption", corruption, CIFAR10_C_CORRUPTIONS)
        data = self._load("cifar10_c", "test", corruption=corruption, severity=severity)
        _, test_idx = self.test_indices(seed)
        return ImageTensors(self._float(data.images[test_idx], self.normalisation),
                            data.labels[test_idx].to(self.device))
