"""Image file readers on small files written in the real formats (IDX, npz, CIFAR pickles,
SVHN mat, CIFAR-10-C npy), cross-checked with torchvision's own IDX reader."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from torchvision.datasets.mnist import read_image_file, read_label_file

from bench.datasets import image_files
from bench.datasets.image_files import ImageDataCorruptError
from bench.harness.errors import ConfigError
from tests.unit.datasets.image_fixtures import (
    idx_bytes,
    write_cifar,
    write_cifar10_c,
    write_idx,
    write_kmnist_npz,
    write_mnist_like,
    write_svhn,
)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.mark.parametrize("compress", [True, False])
def test_idx_reader_returns_the_written_array_and_agrees_with_torchvision(tmp_path, rng,
                                                                          compress):
    written = write_mnist_like(tmp_path, rng, compress=compress)
    suffix = ".gz" if compress else ""
    images = image_files.read_idx(tmp_path / f"t10k-images-idx3-ubyte{suffix}", ndim=3)
    labels = image_files.read_idx(tmp_path / f"t10k-labels-idx1-ubyte{suffix}", ndim=1)
    np.testing.assert_array_equal(images, written["test"][0])
    np.testing.assert_array_equal(labels, written["test"][1])
    assert images.shape == (40, 28, 28) and labels.shape == (40,)
    if not compress:  # torchvision's reader takes unpacked files
        np.testing.assert_array_equal(
            images, read_image_file(str(tmp_path / "t10k-images-idx3-ubyte")).numpy())
        np.testing.assert_array_equal(
            labels, read_label_file(str(tmp_path / "t10k-labels-idx1-ubyte")).numpy())


def test_idx_header_is_checked(tmp_path, rng):
    images = rng.integers(0, 256, size=(5, 4, 3), dtype=np.uint8)
    good = idx_bytes(images)
    (tmp_path / "short").write_bytes(good[:-1])
    (tmp_path / "magic").write_bytes(b"\x00\x00\x0d\x03" + good[4:])
    (tmp_path / "cut.gz").write_bytes(gzip.compress(good)[:-8])
    write_idx(tmp_path / "labels", images[:, 0, 0], compress=False)
    with pytest.raises(ImageDataCorruptError, match=r"short.*header says \(5, 4, 3\).*cut short"):
        image_files.read_idx(tmp_path / "short")
    with pytest.raises(ImageDataCorruptError, match="magic 00000d03"):
        image_files.read_idx(tmp_path / "magic")
    with pytest.raises(ImageDataCorruptError, match="not a complete gzip file"):
        image_files.read_idx(tmp_path / "cut.gz")
    with pytest.raises(ImageDataCorruptError, match="1 dimensions where 3 were expected"):
        image_files.read_idx(tmp_path / "labels", ndim=3)
    assert issubclass(ImageDataCorruptError, ConfigError)


def test_kmnist_npz_and_the_image_label_pair(tmp_path, rng):
    written = write_kmnist_npz(tmp_path, rng)
    images, labels = image_files.read_image_label_pair(tmp_path / "kmnist-train-imgs.npz",
                                                       tmp_path / "kmnist-train-labels.npz")
    np.testing.assert_array_equal(images[:, 0], written["train"][0])
    assert images.shape == (64, 1, 28, 28) and labels.dtype == np.int64
    np.testing.assert_array_equal(labels, written["train"][1])
    with pytest.raises(ImageDataCorruptError, match="holds 64 images but .* 40 labels"):
        image_files.read_image_label_pair(tmp_path / "kmnist-train-imgs.npz",
                                          tmp_path / "kmnist-test-labels.npz")


# A gzip header followed by a deflate block of the reserved type 3: zlib.error, not EOFError.
BAD_DEFLATE_GZ = bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF, 0x07])


def test_truncated_or_garbled_files_name_the_file_and_what_was_expected(tmp_path, rng):
    write_kmnist_npz(tmp_path, rng)
    whole = (tmp_path / "kmnist-train-imgs.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "garbled.gz").write_bytes(BAD_DEFLATE_GZ)
    (tmp_path / "folder.gz").mkdir()
    for name in ("cut.npz", "empty.npz"):
        with pytest.raises(ImageDataCorruptError,
                           match=rf"{name}: not a readable \.npz archive with array 'arr_0'"):
            image_files.read_grey_images(tmp_path / name)
    with pytest.raises(ImageDataCorruptError, match="garbled.gz: not a complete gzip file"):
        image_files.read_idx(tmp_path / "garbled.gz", ndim=3)
    with pytest.raises(ImageDataCorruptError, match="folder.gz: unreadable"):
        image_files.read_labels(tmp_path / "folder.gz")


def test_emnist_transposed_storage_is_made_upright(tmp_path):
    upright = np.zeros((1, 28, 28), dtype=np.uint8)
    upright[0, 2, 5:20] = 255  # a horizontal bar near the top
    write_idx(tmp_path / "images", upright.transpose(0, 2, 1), compress=False)
    write_idx(tmp_path / "labels", np.array([7], dtype=np.uint8), compress=False)
    stored, _ = image_files.read_image_label_pair(tmp_path / "images", tmp_path / "labels")
    fixed, _ = image_files.read_image_label_pair(tmp_path / "images", tmp_path / "labels",
                                                 transposed=True)
    np.testing.assert_array_equal(fixed[:, 0], upright)
    assert stored[0, 0, 5:20, 2].tolist() == [255] * 15  # the bar is a column when stored


@pytest.mark.parametrize("hundred", [False, True])
def test_cifar_pickles_concatenate_batches_in_order(tmp_path, rng, hundred):
    written = write_cifar(tmp_path, rng, hundred=hundred)
    names = ["train"] if hundred else [f"data_batch_{i}" for i in range(1, 6)]
    images, labels = image_files.read_cifar_batches([tmp_path / n for n in names],
                                                    "fine_labels" if hundred else "labels")
    assert images.shape == (6 * len(names), 3, 32, 32) and images.dtype == np.uint8
    np.testing.assert_array_equal(images, written["train"][0])
    np.testing.assert_array_equal(labels, written["train"][1])
    # Row layout: the first 1024 values of a row are the red plane, row-major.
    raw = written["train"][0].reshape(len(labels), -1)
    assert images[0, 0, 1, 0] == raw[0, 32] and images[0, 1, 0, 0] == raw[0, 1024]
    with pytest.raises(ImageDataCorruptError, match="'coarse_label'"):
        image_files.read_cifar_batches([tmp_path / names[0]], "coarse_label")


def test_svhn_mat_reorders_axes_and_maps_label_ten_to_zero(tmp_path, rng):
    written = write_svhn(tmp_path, rng, n=12)
    images, labels = image_files.read_svhn_mat(tmp_path / "test_32x32.mat")
    assert images.shape == (12, 3, 32, 32) and images.dtype == np.uint8
    np.testing.assert_array_equal(images, written["test"][0])
    np.testing.assert_array_equal(labels, written["test"][1])
    assert labels.min() == 0 and labels.max() == 9 and labels.dtype == np.int64


@pytest.mark.parametrize("severity", [1, 3, 5])
def test_cifar10_c_takes_the_rows_of_one_severity(tmp_path, severity):
    write_cifar10_c(tmp_path, "fog", per_severity=20)
    images, labels = image_files.read_cifar10_c(tmp_path / "fog.npy", tmp_path / "labels.npy",
                                                severity)
    assert images.shape == (20, 3, 32, 32)
    np.testing.assert_array_equal(images[:, 1, 4, 7], 40 * severity + np.arange(20) % 40)
    np.testing.assert_array_equal(labels, np.arange((severity - 1) * 20, severity * 20) % 10)
    np.save(tmp_path / "short.npy", np.zeros((7, 32, 32, 3), np.uint8))
    with pytest.raises(ImageDataCorruptError, match=r"\[7, 32, 32, 3\]"):
        image_files.read_cifar10_c(tmp_path / "short.npy", tmp_path / "labels.npy", 1)
