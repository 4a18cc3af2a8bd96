"""Random images in the shape of a real image data set, for jobs that need its shape only.

Laplace Redux Table 5 measures the memory of each method's state on WRN-16-4 / CIFAR-10: the
state's size depends on the network and on the number of classes, not on the pixel values, so
a handful of standard-normal images of CIFAR-10's shape (3 x 32 x 32, 10 classes) with uniform
labels stands in for the data and no data file is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.datasets.image_classification import ImageSplits
from bench.datasets.vision import image_source
from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator


@dataclass
class GeneratedImages:
    """``n_train`` training and ``n_test`` test images shaped like ``images`` (a name of
    :data:`bench.datasets.vision.IMAGE_SOURCES`), pixels standard normal, labels uniform over
    its classes, drawn on the CPU from the seed and put on ``device``."""

    name: str
    images: str = "cifar10"
    n_train: int = 8
    n_test: int = 8
    device: str = "cpu"

    def __post_init__(self) -> None:
        source = image_source(self.images)
        self.input_shape = source.shape
        self.num_classes = source.num_classes
        for key in ("n_train", "n_test"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"dataset.{key}={value!r} is not valid; it must be a positive "
                                  "integer")

    def splits(self, seed: int = 0) -> ImageSplits:
        """Training and test images from ``seed`` (no validation images)."""
        generator = make_generator(seed)
        n = self.n_train + self.n_test
        x = torch.randn((n, *self.input_shape), generator=generator).to(self.device)
        y = torch.randint(self.num_classes, (n,), generator=generator).to(self.device)
        train, test = torch.arange(self.n_train), torch.arange(self.n_train, n)
        empty = torch.zeros(0, dtype=torch.long)
        return ImageSplits(x[train], y[train], x[:0], y[:0], x[test], y[test], train, empty,
                           test - self.n_train)
