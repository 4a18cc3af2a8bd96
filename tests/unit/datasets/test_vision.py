"""load_images: folders (ours and torchvision's), the download fallback and its one-line error,
the shared MNIST-family copies, normalisations, R-MNIST rotation and permuted-MNIST pixels."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms.functional as TF
from PIL import Image

from bench.datasets import vision
from bench.datasets.image_transforms import (
    NORMALISATIONS,
    ROTATION_ANGLES,
    permute_pixels,
    pixel_permutation,
    rotate_images,
    to_float,
)
from bench.datasets.vision import ImageDataMissingError, load_images, load_permuted, load_rotated
from bench.harness.errors import ConfigError
from tests.helpers import SHARED_DATA
from tests.unit.datasets.image_fixtures import (
    idx_bytes,
    write_cifar,
    write_cifar10_c,
    write_kmnist_npz,
    write_mnist_like,
    write_svhn,
)

needs_shared = pytest.mark.skipif(not (SHARED_DATA / "mnist").is_dir(),
                                  reason="../shared/data (offline MNIST copies) not present")


@pytest.fixture
def rng():
    return np.random.default_rng(1)


@pytest.fixture
def no_download(monkeypatch):
    """Every torchvision downloader fails as it does offline, without touching the network."""
    calls = []

    def offline(class_name, **fixed):
        def download(root, split):
            calls.append((class_name, split))
            raise RuntimeError("Error downloading: <urlopen error [Errno -2] Name or service>")
        return download

    for name, source in list(vision.IMAGE_SOURCES.items()):
        if source.download is not None:
            patched = dataclasses.replace(source, download=offline(name))
            monkeypatch.setitem(vision.IMAGE_SOURCES, name, patched)
    return calls


@pytest.mark.parametrize("folder", ["mnist", "MNIST/raw"])
def test_mnist_from_our_folder_or_torchvisions(tmp_path, rng, folder):
    written = write_mnist_like(tmp_path / folder, rng, compress=folder == "mnist")
    data = load_images("mnist", "test", tmp_path)
    assert data.images.shape == (40, 1, 28, 28) and data.images.dtype == torch.uint8
    assert data.labels.dtype == torch.int64 and data.num_classes == 10 and len(data) == 40
    np.testing.assert_array_equal(data.images[:, 0].numpy(), written["test"][0])
    np.testing.assert_array_equal(data.labels.numpy(), written["test"][1])
    if folder == "MNIST/raw":  # torchvision reads the same folder to the same arrays
        reference = torchvision.datasets.MNIST(str(tmp_path), train=False)
        assert torch.equal(data.images[:, 0], reference.data)
        assert torch.equal(data.labels, reference.targets)


def test_kmnist_npz_beside_idx_labels_as_in_the_shared_copy(tmp_path, rng):
    written = write_kmnist_npz(tmp_path / "kmnist", rng)
    data = load_images("kmnist", "train", tmp_path)
    np.testing.assert_array_equal(data.images[:, 0].numpy(), written["train"][0])


def test_emnist_digits_upright_and_in_torchvisions_orientation(tmp_path, rng):
    written = write_mnist_like(tmp_path / "EMNIST/raw", rng, compress=False,
                               prefixes=("emnist-digits-train", "emnist-digits-test"))
    stored = written["test"][0]
    upright = load_images("emnist_digits", "test", tmp_path)
    as_torchvision = load_images("emnist_digits_torchvision", "test", tmp_path)
    np.testing.assert_array_equal(upright.images[:, 0].numpy(), stored.transpose(0, 2, 1))
    reference = torchvision.datasets.EMNIST(str(tmp_path), split="digits", train=False)
    assert torch.equal(as_torchvision.images[:, 0], reference.data)


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_from_the_unpacked_tarball_folder(tmp_path, rng, name):
    inner = "cifar-100-python" if name == "cifar100" else "cifar-10-batches-py"
    written = write_cifar(tmp_path / name / inner, rng, hundred=name == "cifar100")
    for split in ("train", "test"):
        data = load_images(name, split, tmp_path)
        assert torch.equal(data.images, torch.from_numpy(written[split][0]))
        assert torch.equal(data.labels, torch.from_numpy(written[split][1]).long())
    assert data.num_classes == (100 if name == "cifar100" else 10)
    assert len(load_images(name, "train", tmp_path)) == (6 if name == "cifar100" else 30)


def test_svhn_in_our_folder_and_in_the_root_as_torchvision_keeps_it(tmp_path, rng):
    ours = write_svhn(tmp_path / "svhn", rng)
    assert torch.equal(load_images("svhn", "test", tmp_path).labels,
                       torch.from_numpy(ours["test"][1]).long())
    theirs = write_svhn(tmp_path / "other", rng)
    data = load_images("svhn", "train", tmp_path / "other")
    assert torch.equal(data.images, torch.from_numpy(theirs["train"][0]))


def test_cifar10_c_severity_and_severity_zero_is_the_clean_test_set(tmp_path, rng):
    clean = write_cifar(tmp_path / "cifar10/cifar-10-batches-py", rng)
    write_cifar10_c(tmp_path / "CIFAR-10-C", "gaussian_noise", per_severity=6)
    zero = load_images("cifar10_c", "test", tmp_path, corruption="gaussian_noise", severity=0)
    assert torch.equal(zero.images, torch.from_numpy(clean["test"][0]))
    two = load_images("cifar10_c", "test", tmp_path, corruption="gaussian_noise", severity=2)
    assert two.images.shape == (6, 3, 32, 32)
    assert two.images[:, 2, 0, 0].tolist() == [80 + i for i in range(6, 12)]
    with pytest.raises(ConfigError, match="^corruption='rain' is not valid; choose one of: "
                       "brightness, contrast"):
        load_images("cifar10_c", "test", tmp_path, corruption="rain", severity=1)
    with pytest.raises(ConfigError, match="^severity=6 is not valid"):
        load_images("cifar10_c", "test", tmp_path, corruption="fog", severity=6)


def test_missing_files_one_line_naming_files_and_folder_after_the_download_fails(
        tmp_path, no_download):
    with pytest.raises(ImageDataMissingError) as caught:
        load_images("mnist", "train", tmp_path)
    message = str(caught.value)
    assert "\n" not in message and no_download == [("mnist", "train")]
    assert message.startswith(
        f"image data set 'mnist' (train split) not found: put train-images-idx3-ubyte.gz, "
        f"train-labels-idx1-ubyte.gz in {tmp_path}/mnist/ (data root from $BENCH_DATA_DIR")
    assert f"torchvision's folder {tmp_path}/MNIST/raw/ is read too" in message
    assert message.endswith("the torchvision download failed too (RuntimeError: Error "
                            "downloading: <urlopen error [Errno -2] Name or service>)")
    assert isinstance(caught.value, ConfigError) and isinstance(caught.value, FileNotFoundError)


def test_missing_files_without_a_downloader_or_with_download_off(tmp_path, rng, no_download):
    with pytest.raises(ImageDataMissingError, match=r"put fog.npy, labels.npy in "
                       rf"{tmp_path}/cifar10_c/ .*torchvision has no downloader for it$"):
        load_images("cifar10_c", "test", tmp_path, corruption="fog", severity=1)
    write_cifar(tmp_path / "cifar10/cifar-10-batches-py", rng)
    (tmp_path / "cifar10/cifar-10-batches-py/data_batch_4").unlink()
    with pytest.raises(ImageDataMissingError, match=r"put data_batch_4 in .*; download is off$"):
        load_images("cifar10", "train", tmp_path, download=False)
    assert no_download == []


@needs_shared
@pytest.mark.second_tier
def test_shared_mnist_matches_the_published_counts_labels_and_md5():
    train, test = load_images("mnist", "train", SHARED_DATA), load_images("mnist", "test",
                                                                          SHARED_DATA)
    assert (len(train), len(test)) == (60_000, 10_000)
    assert torch.bincount(test.labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958,
                                                    1028, 974, 1009]
    assert torch.bincount(train.labels).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918,
                                                     6265, 5851, 5949]
    assert test.labels[:5].tolist() == [7, 2, 1, 0, 4] and int(train.labels[0]) == 5
    # md5 of the unpacked train-images IDX file as published (shared/data/MANIFEST.md)
    rebuilt = idx_bytes(train.images[:, 0].numpy())
    assert hashlib.md5(rebuilt).hexdigest() == "6bbc9ace898e44ae57da46a324031adb"


@needs_shared
@pytest.mark.parametrize("name", ["fashion_mnist", "kmnist"])
def test_shared_fashion_mnist_and_kmnist_test_sets_are_balanced(name):
    test = load_images(name, "test", SHARED_DATA)
    assert test.images.shape == (10_000, 1, 28, 28)
    assert torch.bincount(test.labels).tolist() == [1000] * 10
    if name == "fashion_mnist":
        assert torch.bincount(load_images(name, "train", SHARED_DATA).labels).tolist() == \
            [6000] * 10


def test_to_float_unit_and_per_channel_normalisation():
    images = torch.tensor([0, 51, 255], dtype=torch.uint8).view(1, 1, 1, 3).repeat(1, 3, 1, 1)
    unit = to_float(images[:, :1])
    assert unit.dtype == torch.float32
    torch.testing.assert_close(unit.flatten(), torch.tensor([0.0, 0.2, 1.0]))
    cifar = to_float(images, "cifar10")
    mean, std = (125.3, 123.0, 113.9), (63.0, 62.1, 66.7)
    expected = torch.tensor([[(v - m) / s for v in (0, 51, 255)] for m, s in zip(mean, std,
                                                                                 strict=True)])
    torch.testing.assert_close(cifar.view(3, 3), expected)
    assert NORMALISATIONS["svhn_redux"].std == (0.19803012, 0.20101562, 0.19703614)
    with pytest.raises(ConfigError, match="^dataset.normalisation='imagenet' is not valid"):
        to_float(images, "imagenet")
    with pytest.raises(ConfigError, match="3 means for images with 1 channels"):
        to_float(images[:, :1], "cifar10")


def test_rotation_by_90_is_rot90_counter_clockwise_and_45_fills_zeros(rng):
    images = torch.from_numpy(rng.integers(1, 256, size=(3, 1, 28, 28), dtype=np.uint8))
    assert torch.equal(rotate_images(images, 90), torch.rot90(images, 1, dims=(2, 3)))
    colour = torch.from_numpy(rng.integers(1, 256, size=(2, 3, 32, 32), dtype=np.uint8))
    assert torch.equal(rotate_images(colour, 90), torch.rot90(colour, 1, dims=(2, 3)))
    white = torch.full((1, 1, 28, 28), 255, dtype=torch.uint8)
    turned = rotate_images(white, 45)
    assert turned[0, 0, 0, 0] == 0 and turned[0, 0, 0, 27] == 0 and turned[0, 0, 14, 14] == 255
    assert ROTATION_ANGLES == (0, 15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 165, 180)


def test_rotation_equals_laplace_redux_path_through_torchvision_rotate(rng):
    images = torch.from_numpy(rng.integers(0, 256, size=(2, 1, 28, 28), dtype=np.uint8))
    for angle in (15, 105):
        reference = [np.asarray(TF.rotate(Image.fromarray(img[0].numpy(), "L"), angle))
                     for img in images]
        assert torch.equal(rotate_images(images, angle)[:, 0],
                           torch.from_numpy(np.stack(reference)))


def test_rotated_mnist_on_the_shared_test_image_when_present(tmp_path, rng):
    root = SHARED_DATA if (SHARED_DATA / "mnist").is_dir() else tmp_path
    if root == tmp_path:
        write_mnist_like(tmp_path / "mnist", rng)
    test = load_images("mnist", "test", root)
    rotated = load_rotated("mnist", "test", 90, root)
    assert torch.equal(rotated.images[:5], torch.rot90(test.images[:5], 1, dims=(2, 3)))
    assert torch.equal(rotated.labels, test.labels)


def test_pixel_permutation_is_a_reproducible_true_permutation_per_task():
    state = np.random.get_state()[1].copy()
    first, again, other = pixel_permutation(3), pixel_permutation(3), pixel_permutation(4)
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert torch.equal(first.sort().values, torch.arange(784))
    assert torch.equal(pixel_permutation(0), torch.arange(784))
    redux = np.arange(784)
    np.random.RandomState(3).shuffle(redux)  # Redux: np.random.seed(task); shuffle(arange)
    assert first.tolist() == redux.tolist()
    assert first[:5].tolist() == [294, 102, 51, 453, 457]
    assert np.array_equal(np.random.get_state()[1], state)  # the global RNG is untouched
    with pytest.raises(ConfigError, match="task=-1"):
        pixel_permutation(-1)


def test_permute_pixels_takes_old_pixel_perm_i_into_place_i(tmp_path, rng):
    images = torch.arange(8, dtype=torch.uint8).view(2, 1, 2, 2)
    permuted = permute_pixels(images, torch.tensor([3, 0, 2, 1]))
    assert permuted.tolist() == [[[[3, 0], [2, 1]]], [[[7, 4], [6, 5]]]]
    write_mnist_like(tmp_path / "mnist", rng)
    task = load_permuted("mnist", "train", 2, tmp_path)
    plain = load_images("mnist", "train", tmp_path)
    assert torch.equal(task.images.flatten(1), plain.images.flatten(1)[:, pixel_permutation(2)])
    assert torch.equal(load_permuted("mnist", "train", 0, tmp_path).images, plain.images)
