"""Training-time augmentation of normalised image minibatches, drawn from an explicit generator.

Laplace Redux trains every CIFAR-10 network (MAP, DE members, BBB, CSGHMC, SWAG) on a loader
with ``RandomHorizontalFlip()`` and ``RandomCrop(32, padding=4)`` before ``ToTensor`` and
``Normalize``, and fits the Laplace approximations on that same loader (notes section 0).
Here the training images are already normalised float tensors, so :class:`CropFlip` pads each
image with the *normalised* value of a black pixel (``(0 - mean) / std`` per channel: the zero
padding torchvision adds before normalising), takes a random ``H x W`` window and mirrors it
left-right with probability 1/2. Flipping before or after the crop gives the same distribution
(the offsets are symmetric), so one gather does both.

Names (:data:`AUGMENTATIONS`): ``none`` and ``crop_flip``. The random offsets and flips of a
batch come from the caller's CPU generator (the minibatch generator of the training run, so a
resumed run continues bit for bit) and are moved to the images' device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bench.datasets.image_transforms import normalisation
from bench.harness.errors import ConfigError, require_choice

AUGMENTATIONS = ("none", "crop_flip")
CROP_PADDING = 4

Augment = Callable[[Tensor, torch.Generator], Tensor]


@dataclass(frozen=True)
class CropFlip:
    """Random ``H x W`` crop of each image zero-padded by ``padding`` (pad value ``fill`` per
    channel, or one value for every channel), then a horizontal flip with probability 1/2."""

    padding: int = CROP_PADDING
    fill: tuple[float, ...] = (0.0,)

    def __call__(self, images: Tensor, generator: torch.Generator) -> Tensor:
        """Augmented copy of ``images [B, C, H, W]``; draws ``2 B`` offsets then ``B`` flips
        from the CPU ``generator``."""
        n, channels, height, width = images.shape
        p = self.padding
        offsets = torch.randint(0, 2 * p + 1, (2, n), generator=generator)
        flips = torch.randint(0, 2, (n,), generator=generator).bool()
        device = images.device
        offsets, flips = offsets.to(device), flips.to(device)
        fill = torch.as_tensor(self.fill, dtype=images.dtype, device=device)
        padded = fill.view(1, -1, 1, 1).expand(n, channels, height + 2 * p,
                                               width + 2 * p).clone()
        padded[:, :, p:p + height, p:p + width] = images
        rows = offsets[0, :, None] + torch.arange(height, device=device)
        columns = torch.arange(width, device=device).expand(n, width)
        columns = offsets[1, :, None] + torch.where(flips[:, None], width - 1 - columns, columns)
        batch = torch.arange(n, device=device)[:, None, None, None]
        channel = torch.arange(channels, device=device)[None, :, None, None]
        return padded[batch, channel, rows[:, None, :, None], columns[:, None, None, :]]


def black_pixel(norm: str) -> tuple[float, ...]:
    """The value a black pixel (0) has after normalisation ``norm``: ``-mean / std``."""
    values = normalisation(norm)
    channels = max(len(values.mean), len(values.std))
    mean = values.mean * (channels // len(values.mean))
    std = values.std * (channels // len(values.std))
    return tuple(-m / s for m, s in zip(mean, std, strict=True))


def training_augmentation(name: str, norm: str, key: str = "dataset.augmentation"
                          ) -> Augment | None:
    """The augmentation ``name`` for images normalised by ``norm`` (None for ``none``); a
    one-line ConfigError naming ``key`` for an unknown name or a normalisation without
    registered statistics."""
    require_choice(key, name, AUGMENTATIONS)
    if name == "none":
        return None
    try:
        fill = black_pixel(norm)
    except ConfigError:
        raise ConfigError(f"{key}={name!r} needs the images' normalisation to pad with black; "
                          f"{norm!r} is not a registered normalisation") from None
    return CropFlip(CROP_PADDING, fill)
