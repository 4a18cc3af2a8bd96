"""The images of a few classes of an image set, relabelled ``0..k-1`` in the order given.

Binary MNIST 4 vs 9 of the GGN thesis, section 5.3 (reproduction notes 2.3): ``images=mnist``,
``classes=[4, 9]`` gives y = 0 for a "4" and y = 1 for a "9" [R]; ``n_train`` training images
drawn at random among the MNIST training images of those classes (3000 [T]); the test set is
every MNIST test image of those classes [R] (1991 for 4 and 9), or ``n_test`` of them at small
scales; pixels / 255 (``normalisation=unit``).

Draws come from generators derived from the ``seed`` the methods take (training subset and
test subset from their own streams), so one seed gives one training set. The ``*_indices`` of
the splits index the full split of the image set (the MNIST training or test file).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from bench.datasets.image_classification import (
    SET_CHOICES,
    TEST_STREAM,
    TRAIN_STREAM,
    ImageSplits,
    _optional_count,
    _subset,
)
from bench.datasets.image_transforms import normalisation, to_float
from bench.datasets.vision import IMAGE_SOURCES, load_images, require_image_files
from bench.harness.errors import ConfigError, require_choice
from bench.harness.rng import derived_seed, make_generator


def class_indices(labels: Tensor, classes: Sequence[int]) -> Tensor:
    """Positions (ascending) of the entries of ``labels`` that are one of ``classes``."""
    return torch.isin(labels, torch.tensor(list(classes), dtype=labels.dtype)).nonzero(
    ).squeeze(1)


def relabel(labels: Tensor, classes: Sequence[int]) -> Tensor:
    """``labels`` (each one of ``classes``) mapped to their position in ``classes``."""
    mapped = torch.full_like(labels, -1)
    for new, old in enumerate(classes):
        mapped[labels == old] = new
    if bool((mapped < 0).any()):
        raise ValueError(f"labels outside the classes {list(classes)}")
    return mapped


@dataclass
class ClassSubsetImageData:
    """The images of ``classes`` (original labels of image set ``images``), relabelled in the
    order given: ``classes[0]`` -> 0, ``classes[1]`` -> 1, ...

    ``n_train``: that many training images drawn without replacement from the training
    images of the classes (None: all); ``n_test``: the same for the test images (None: all,
    in file order); ``normalisation``: a key of ``image_transforms.NORMALISATIONS``;
    ``root``: data root (default ``$BENCH_DATA_DIR``); ``device``: where tensors are put;
    ``download``: let torchvision fetch missing files.
    """

    name: str
    images: str
    classes: Sequence[int]
    n_train: int | None = None
    n_test: int | None = None
    normalisation: str = "unit"
    root: str | None = None
    device: str = "cpu"
    download: bool = False
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        source = IMAGE_SOURCES[require_choice("dataset.images", self.images, SET_CHOICES)]
        self.classes = tuple(self.classes)
        valid = range(source.num_classes)
        if (len(self.classes) < 2 or len(set(self.classes)) != len(self.classes)
                or not all(isinstance(c, int) and not isinstance(c, bool) and c in valid
                           for c in self.classes)):
            raise ConfigError(f"dataset.classes={list(self.classes)!r} is not valid; it must "
                              f"list at least two distinct labels of {self.images} in "
                              f"0..{source.num_classes - 1}")
        _optional_count("dataset.n_train", self.n_train, source.sizes["train"])
        _optional_count("dataset.n_test", self.n_test, source.sizes["test"])
        normalisation(self.normalisation)
        require_image_files({self.images: ["train", "test"]}, self.root, self.download)

    @property
    def num_classes(self) -> int:
        """Number of classes after relabelling (``len(classes)``)."""
        return len(self.classes)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """One image's ``(C, H, W)``."""
        return IMAGE_SOURCES[self.images].shape

    def _pool(self, split: str, limit: int | None, key: str, seed: int, stream: int
              ) -> tuple[Tensor, Tensor, Tensor]:
        """(float images, new labels, indices into the full split) of one split."""
        data = load_images(self.images, split, self.root, download=self.download)
        pool = class_indices(data.labels, self.classes)
        if limit is not None and limit > len(pool):
            raise ConfigError(f"{key}={limit} is more than the {len(pool)} {split} images of "
                              f"classes {list(self.classes)} in {self.images}")
        generator = make_generator(derived_seed(int(seed), spawn_key=(stream,)))
        chosen = _subset(pool, limit, generator)
        images = to_float(data.images[chosen], self.normalisation, self.device)
        return images, relabel(data.labels[chosen], self.classes).to(self.device), chosen

    def splits(self, seed: int = 0) -> ImageSplits:
        """Float train / test tensors of the classes (subsets drawn from ``seed``), cached;
        the validation part is empty."""
        key = ("splits", seed)
        if key not in self._cache:
            x_train, y_train, train_idx = self._pool("train", self.n_train, "dataset.n_train",
                                                     seed, TRAIN_STREAM)
            x_test, y_test, test_idx = self._pool("test", self.n_test, "dataset.n_test", seed,
                                                  TEST_STREAM)
            empty = torch.zeros(0, dtype=torch.long)
            self._cache[key] = ImageSplits(x_train, y_train, x_test[:0], y_test[:0], x_test,
                                           y_test, train_idx, empty, test_idx)
        return self._cache[key]
