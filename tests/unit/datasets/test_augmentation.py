"""Crop-and-flip augmentation: torchvision's RandomCrop(32, padding=4) + RandomHorizontalFlip on
normalised tensors, its draws, and its use by the MAP store's training and its resume."""

from __future__ import annotations

import pytest
import torch
import torchvision.transforms.functional as TF

from bench.datasets.augmentation import CropFlip, black_pixel, training_augmentation
from bench.datasets.image_transforms import NORMALISATIONS, to_float
from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.training.classifier import TrainingStage
from bench.training.network_store import (
    DatasetIdentity,
    TrainingRecipe,
    network_dir,
    recipe_hash,
    trained_network,
)


def test_each_image_is_torchvisions_padded_crop_then_flip_for_the_drawn_offsets():
    images = torch.randn(6, 3, 32, 32, generator=make_generator(0))
    fill = (-1.5, -0.25, 2.0)
    augment = CropFlip(4, fill)
    generator = make_generator(7)
    replay = make_generator(7)
    out = augment(images, generator)
    offsets = torch.randint(0, 9, (2, 6), generator=replay)
    flips = torch.randint(0, 2, (6,), generator=replay)
    for i in range(6):
        # torchvision pads each channel with one fill value: pad per channel, then crop.
        padded = torch.stack([TF.pad(images[i, c:c + 1], [4], fill=fill[c])[0]
                              for c in range(3)])
        expected = TF.crop(padded, int(offsets[0, i]), int(offsets[1, i]), 32, 32)
        if flips[i]:
            expected = TF.hflip(expected)
        assert torch.equal(out[i], expected)
    assert torch.equal(generator.get_state(), replay.get_state())  # 2 B offsets + B flips


def test_every_offset_and_flip_occurs_and_flips_are_half():
    augment = CropFlip(4, (0.0,))
    # A ramp identifies where the window starts: pixel (0, 0) of the crop tells the offsets.
    ramp = (torch.arange(32.0)[:, None] * 32 + torch.arange(32.0)[None, :] + 1).expand(
        4000, 1, 32, 32)
    out = augment(ramp, make_generator(3))
    flipped = out[:, 0, 8, 8] > out[:, 0, 8, 9]
    assert abs(float(flipped.float().mean()) - 0.5) < 0.03
    # The centre pixel (16, 16) lands at (16 + 4 - dy, ...): every shift -4..4 occurs.
    row_shift = {int(v) for v in (out[:, 0, 16, 16] - 1).div(32, rounding_mode="floor") - 16}
    assert row_shift == set(range(-4, 5))


def test_padding_is_black_in_the_normalisations_units():
    assert black_pixel("unit") == (-0.0,)
    cifar = NORMALISATIONS["cifar10"]
    expected = [-m / s for m, s in zip(cifar.mean, cifar.std, strict=True)]
    assert black_pixel("cifar10") == pytest.approx(expected)
    white = to_float(torch.full((64, 3, 32, 32), 255, dtype=torch.uint8), "cifar10")
    out = training_augmentation("crop_flip", "cifar10")(white, make_generator(0))
    top = torch.randint(0, 9, (2, 64), generator=make_generator(0))[0]
    mean = torch.tensor(cifar.mean).view(1, 3, 1, 1)
    std = torch.tensor(cifar.std).view(1, 3, 1, 1)
    pixels = (out * std + mean).round(decimals=5)
    for i in range(64):
        # A window starting at padded row t shows 4 - t black rows, then the white image.
        black_rows = max(4 - int(top[i]), 0)
        assert torch.all(pixels[i, :, :black_rows, 8] == 0)
        assert torch.all(pixels[i, :, black_rows:min(black_rows + 24, 32), 8] == 1)


def test_bad_names_are_one_line_config_errors():
    assert training_augmentation("none", "cifar10") is None
    with pytest.raises(ConfigError, match=r"^dataset.augmentation='crop' is not valid; choose "
                                          r"one of: none, crop_flip$"):
        training_augmentation("crop", "cifar10")
    with pytest.raises(ConfigError, match=r"^dataset.augmentation='crop_flip' needs the images' "
                                          r"normalisation .* 'pixels/255' is not a registered"):
        training_augmentation("crop_flip", "pixels/255")


def test_training_set_identity_names_the_augmentation_only_when_there_is_one():
    x, y = torch.zeros(4, 3, 32, 32), torch.zeros(4, dtype=torch.long)
    plain = TrainingSet(x, y, "cifar10", "cifar10")
    assert "augmentation" not in plain.identity() and plain.augmenter() is None
    augmented = TrainingSet(x, y, "cifar10", "cifar10", augmentation="crop_flip")
    assert augmented.identity()["augmentation"] == "crop_flip"
    assert isinstance(augmented.augmenter(), CropFlip)


def wrn_recipe(augmentation: str = "none") -> TrainingRecipe:
    return TrainingRecipe(
        model="wrn16_4", model_options={"widen": 1, "dropout": 0.3},
        dataset=DatasetIdentity("cifar10", "cifar10", (3, 32, 32), 24, augmentation),
        stages=(TrainingStage(epochs=3, lr=0.05, batch_size=8, optimizer="sgd", momentum=0.9,
                              nesterov=True, schedule="cosine"),))


def test_augmentation_enters_the_recipe_hash_and_none_keeps_old_hashes():
    plain, augmented = wrn_recipe(), wrn_recipe("crop_flip")
    assert "augmentation" not in plain.to_dict()["dataset"]
    assert augmented.to_dict()["dataset"]["augmentation"] == "crop_flip"
    assert recipe_hash(plain) != recipe_hash(augmented)
    assert TrainingRecipe.from_dict(augmented.to_dict()) == augmented
    with pytest.raises(ConfigError, match=r"^recipe.dataset.augmentation='flip' is not valid"):
        wrn_recipe("flip")


@pytest.mark.second_tier
def test_augmented_training_resumes_bit_for_bit_and_differs_from_plain(tmp_path):
    g = make_generator(0)
    images = torch.randn(24, 3, 32, 32, generator=g)
    labels = torch.randint(0, 10, (24,), generator=g)
    recipe = wrn_recipe("crop_flip")
    straight = trained_network(recipe, 5, images, labels, tmp_path / "straight")
    plain = trained_network(wrn_recipe(), 5, images, labels, tmp_path / "straight")

    def interrupt(checkpoint):
        if len(checkpoint.history) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        trained_network(recipe, 5, images, labels, tmp_path / "cut", on_epoch_end=interrupt)
    resumed = trained_network(recipe, 5, images, labels, tmp_path / "cut")
    assert network_dir(tmp_path / "cut", recipe, 5) == resumed.path
    first, again = straight.module.state_dict(), resumed.module.state_dict()
    assert all(torch.equal(first[k], again[k]) for k in first)
    other = plain.module.state_dict()
    assert not torch.equal(first["fc.weight"], other["fc.weight"])
