"""Pixel transforms of uint8 image sets: float conversion with the papers' normalisations,
rotation (R-MNIST) and pixel permutation (permuted MNIST).

Images are ``uint8 [N, C, H, W]`` tensors as :func:`bench.datasets.vision.load_images` returns
them; :func:`to_float` gives ``float32 [N, C, H, W]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from bench.harness.errors import ConfigError, require_choice

PIXEL_MAX = 255.0
# R-MNIST of Laplace Redux (notes section 5): 0, 15, ..., 180 degrees.
ROTATION_ANGLES = tuple(range(0, 181, 15))


@dataclass(frozen=True)
class Normalisation:
    """``(pixels / 255 - mean) / std`` per channel; one-element tuples apply to every channel."""

    mean: tuple[float, ...]
    std: tuple[float, ...]


def _per_255(values: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(v / PIXEL_MAX for v in values)


# Laplace Redux values are from its code (notes sections 0 and 4); the Generalized Laplace
# paper says only "CIFAR normalised per channel", for which "cifar10" is the usual choice.
NORMALISATIONS: dict[str, Normalisation] = {
    # pixels / 255 only: MNIST, Fashion-MNIST, KMNIST, EMNIST (both papers), LSUN (Redux).
    "unit": Normalisation((0.0,), (1.0,)),
    # CIFAR-10 training statistics: Redux's CIFAR-10 train and test loaders.
    "cifar10": Normalisation(_per_255((125.3, 123.0, 113.9)), _per_255((63.0, 62.1, 66.7))),
    # The same statistics rounded to 4 digits: Redux's CIFAR-10-C loader.
    "cifar10_rounded": Normalisation((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    # SVHN test statistics: Redux's SVHN OOD loader.
    "svhn_redux": Normalisation((0.4376821, 0.4437697, 0.47280442),
                                (0.19803012, 0.20101562, 0.19703614)),
    # CIFAR-10 mean with the often-copied std (0.2023, 0.1994, 0.2010): Redux's CIFAR-100 loader.
    "cifar100_redux": Normalisation((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)),
}


def normalisation(name: str, key: str = "dataset.normalisation") -> Normalisation:
    """The registered normalisation ``name``; a one-line ConfigError naming ``key`` otherwise."""
    return NORMALISATIONS[require_choice(key, name, NORMALISATIONS)]


def to_float(images: Tensor, norm: str | Normalisation = "unit",
             device: str | torch.device | None = None) -> Tensor:
    """``float32 [N, C, H, W]`` on ``device`` (default: the images' own): pixels / 255, then
    minus the mean and over the std of ``norm`` per channel."""
    norm = normalisation(norm) if isinstance(norm, str) else norm
    channels = images.shape[1]
    if len(norm.mean) not in (1, channels) or len(norm.std) not in (1, channels):
        raise ConfigError(f"normalisation with {len(norm.mean)} means for images with "
                          f"{channels} channels; choose one made for them")
    x = images.to(device=device or images.device, dtype=torch.float32) / PIXEL_MAX
    mean = torch.tensor(norm.mean, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    std = torch.tensor(norm.std, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    return (x - mean) / std


def rotate_images(images: Tensor, angle: float) -> Tensor:
    """Each image rotated ``angle`` degrees counter-clockwise about its centre, as PIL's
    ``Image.rotate`` does it (nearest neighbour, zero fill, same size); uint8 on the CPU."""
    if angle % 360 == 0:
        return images.cpu().clone()
    n, channels, height, width = images.shape
    mode = {1: "L", 3: "RGB"}.get(channels)
    if mode is None:
        raise ValueError(f"rotate_images takes 1 or 3 channels, got {channels}")
    arrays = images.cpu().permute(0, 2, 3, 1).numpy()
    rotated = np.empty_like(arrays)
    for i in range(n):
        picture = Image.fromarray(arrays[i, :, :, 0] if channels == 1 else arrays[i], mode)
        turned = np.asarray(picture.rotate(angle, resample=Image.Resampling.NEAREST,
                                           expand=False, fillcolor=0))
        rotated[i] = turned.reshape(height, width, channels)
    return torch.from_numpy(rotated).permute(0, 3, 1, 2).contiguous()


def pixel_permutation(task: int, n_pixels: int = 784) -> Tensor:
    """The pixel order of permuted-MNIST task ``task`` (0-based), as Laplace Redux's code draws
    it: task 0 keeps the identity, task t > 0 is ``numpy.random.RandomState(t).permutation``,
    which equals its ``np.random.seed(t); np.random.shuffle(arange)`` without global state."""
    if isinstance(task, bool) or not isinstance(task, int | np.integer) or task < 0:
        raise ConfigError(f"task={task!r} is not valid; it must be an integer >= 0")
    if task == 0:
        return torch.arange(n_pixels)
    return torch.from_numpy(np.random.RandomState(int(task)).permutation(n_pixels))


def permute_pixels(images: Tensor, permutation: Tensor) -> Tensor:
    """Images whose flattened ``C*H*W`` values are reordered: new value i = old value
    ``permutation[i]`` (Redux's ``x.view(-1)[perm]``); the shape is kept."""
    flat = images.reshape(images.shape[0], -1)
    if permutation.numel() != flat.shape[1]:
        raise ValueError(f"a permutation of {permutation.numel()} pixels for images of "
                         f"{flat.shape[1]}")
    return flat[:, permutation.to(flat.device)].reshape(images.shape)
