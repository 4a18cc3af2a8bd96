"""ImageClassificationData: key checks, the file check before a run, Laplace Redux's 2k/8k test
split, subsets drawn from explicit generators, OOD normalisations and shifted test sets."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from torch.utils.data import random_split

from bench.datasets.image_classification import ImageClassificationData, redux_test_split
from bench.datasets.image_transforms import NORMALISATIONS
from bench.datasets.vision import ImageDataMissingError
from bench.harness.errors import ConfigError
from bench.harness.job_execution import check_dataset_node
from tests.helpers import compose_config
from tests.unit.datasets.image_fixtures import (
    write_cifar,
    write_cifar10_c,
    write_kmnist_npz,
    write_mnist_like,
    write_svhn,
)


@pytest.fixture(scope="module")
def grey_root(tmp_path_factory):
    """MNIST (64 train / 40 test), Fashion-MNIST and KMNIST files in a fresh data root."""
    root = tmp_path_factory.mktemp("vision")
    rng = np.random.default_rng(2)
    write_mnist_like(root / "mnist", rng)
    write_mnist_like(root / "fashion_mnist", rng)
    write_kmnist_npz(root / "kmnist", rng, sizes=(64, 30))
    return root


def node(root, **overrides) -> ImageClassificationData:
    arguments = dict(name="mnist", images="mnist", ood=["fashion_mnist", "kmnist"],
                     root=str(root))
    return ImageClassificationData(**{**arguments, **overrides})


def test_redux_split_of_the_10k_test_set_is_random_split_with_seed_42():
    val, test = redux_test_split(10_000, 2000, 42)
    expected_val, expected_test = random_split(range(10_000), [2000, 8000],
                                               generator=torch.Generator().manual_seed(42))
    assert val.tolist() == list(expected_val.indices)
    assert test.tolist() == list(expected_test.indices)
    assert len(set(val.tolist()) | set(test.tolist())) == 10_000
    assert val[:4].tolist() == [7542, 8214, 3698, 2841]
    empty, whole = redux_test_split(10_000, 0)
    assert len(empty) == 0 and torch.equal(whole, torch.arange(10_000))


def test_splits_hold_the_files_pixels_with_labels_and_validation_split(grey_root):
    data = node(grey_root, val_size=10)
    splits = data.splits(seed=0)
    assert splits.x_train.shape == (64, 1, 28, 28) and splits.x_train.dtype == torch.float32
    assert splits.x_val.shape == (10, 1, 28, 28) and splits.x_test.shape == (30, 1, 28, 28)
    val, test = redux_test_split(40, 10, 42)
    assert torch.equal(splits.val_indices, val) and torch.equal(splits.test_indices, test)
    assert torch.equal(splits.y_test, test % 10)  # the fixture's labels are index mod 10
    raw = np.frombuffer(gzip.decompress(
        (grey_root / "mnist/t10k-images-idx3-ubyte.gz").read_bytes())[16:], np.uint8)
    expected = torch.from_numpy(raw.reshape(40, 28, 28)[test.numpy()] / 255.0).float()
    torch.testing.assert_close(splits.x_test[:, 0], expected)
    assert data.splits(seed=0) is splits  # cached
    assert data.num_classes == 10 and data.input_shape == (1, 28, 28)


def test_size_limits_are_drawn_per_seed_and_reproducible(grey_root):
    data = node(grey_root, n_train=20, n_test=8)
    first, again, other = data.splits(0), node(grey_root, n_train=20, n_test=8).splits(0), \
        data.splits(1)
    assert first.x_train.shape[0] == 20 and first.x_test.shape[0] == 8
    assert torch.equal(first.train_indices, again.train_indices)
    assert torch.equal(first.test_indices, again.test_indices)
    assert not torch.equal(first.train_indices, other.train_indices)
    assert torch.equal(first.train_indices, first.train_indices.sort().values)
    assert len(set(first.train_indices.tolist())) == 20
    kmnist = data.ood_set("kmnist", seed=0)
    assert kmnist.x.shape == (8, 1, 28, 28) and kmnist.y.dtype == torch.int64
    state = torch.random.get_rng_state()
    node(grey_root, n_train=5).splits(3)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG is untouched


def test_rotated_test_is_the_same_test_images_turned(grey_root):
    data = node(grey_root, val_size=10)
    plain, turned = data.splits(0), data.rotated_test(90)
    assert torch.equal(turned.x, torch.rot90(plain.x_test, 1, dims=(2, 3)))
    assert torch.equal(turned.y, plain.y_test)
    assert torch.equal(data.rotated_test(0).x, plain.x_test)


def test_bad_keys_are_one_line_naming_the_key_and_choices(grey_root):
    cases = [
        (dict(images="mnits"), r"^dataset.images='mnits' is not valid; choose one of: mnist, "),
        (dict(ood=["svhn"]), r"^dataset.ood='svhn' has images of shape \(3, 32, 32\)"),
        (dict(ood=["cifar10_c"]), r"^dataset.ood='cifar10_c' is not valid"),
        (dict(normalisation="imagenet"), r"^dataset.normalisation='imagenet' is not valid; "
                                         "choose one of: unit, cifar10"),
        (dict(ood_normalisation={"svhm": "svhn_redux"}),
         r"^dataset.ood_normalisation='svhm' is not valid; choose one of: mnist, "),
        (dict(ood_normalisation={"kmnist": "cifar100"}),
         r"^dataset.ood_normalisation.kmnist='cifar100' is not valid; choose one of: unit"),
        (dict(augmentation="crop"), r"^dataset.augmentation='crop' is not valid; choose one "
                                    "of: none, crop_flip"),
        (dict(val_size=10_000), r"^dataset.val_size=10000 is not valid; it must be an "
                                r"integer in 0..9999"),
        (dict(n_train=0), r"^dataset.n_train=0 is not valid; it must be null"),
        (dict(n_test=10_001), r"^dataset.n_test=10001 is not valid"),
    ]
    for overrides, message in cases:
        with pytest.raises(ConfigError, match=message):
            node(grey_root, **overrides)
    with pytest.raises(ConfigError, match="^dataset.val_size=40 is not below the 40 test"):
        node(grey_root, val_size=40).splits(0)


def test_missing_files_stop_at_construction_with_the_files_and_folder(tmp_path):
    write_mnist_like(tmp_path / "mnist", np.random.default_rng(0))
    with pytest.raises(ImageDataMissingError) as caught:
        node(tmp_path, ood=["kmnist"])
    message = str(caught.value)
    assert "\n" not in message and isinstance(caught.value, ConfigError)
    assert message.startswith(f"image data set 'kmnist' (test split) not found: put "
                              f"kmnist-test-imgs.npz, kmnist-test-labels.npz in {tmp_path}/"
                              "kmnist/")
    assert message.endswith("or set dataset.download=true to let torchvision fetch them")
    assert node(tmp_path, ood=["kmnist"], download=True).ood == ("kmnist",)


def test_the_harness_check_raises_the_missing_data_line_before_a_run(tmp_path):
    cfg = compose_config(["dataset=mnist", f"dataset.root={tmp_path}"])
    with pytest.raises(ImageDataMissingError,
                       match=r"^image data set 'mnist' \(train and test splits\) not found"):
        check_dataset_node(cfg)


def test_config_nodes_compose_and_build_on_generated_files(grey_root):
    for option in ("mnist", "fashion_mnist", "kmnist"):
        cfg = compose_config([f"dataset={option}", f"dataset.root={grey_root}",
                              "dataset.n_train=4"])
        data = instantiate(cfg.dataset)
        assert isinstance(data, ImageClassificationData) and data.images == option
        assert data.splits(0).x_train.shape == (4, 1, 28, 28)


def test_cifar_ood_sets_use_their_own_normalisation_and_corrupted_test(tmp_path):
    rng = np.random.default_rng(3)
    clean = write_cifar(tmp_path / "cifar10/cifar-10-batches-py", rng)
    hundred = write_cifar(tmp_path / "cifar100/cifar-100-python", rng, hundred=True)
    svhn = write_svhn(tmp_path / "svhn", rng)
    write_cifar10_c(tmp_path / "cifar10_c", "snow", per_severity=6)
    cfg = compose_config(["dataset=cifar10", f"dataset.root={tmp_path}",
                          "+dataset.ood_normalisation.svhn=svhn_redux"])
    data = instantiate(cfg.dataset)
    mean = torch.tensor(NORMALISATIONS["svhn_redux"].mean).view(1, 3, 1, 1)
    std = torch.tensor(NORMALISATIONS["svhn_redux"].std).view(1, 3, 1, 1)
    expected = (torch.from_numpy(svhn["test"][0]) / 255.0 - mean) / std
    torch.testing.assert_close(data.ood_set("svhn").x, expected)
    cifar_mean = torch.tensor(NORMALISATIONS["cifar10"].mean).view(1, 3, 1, 1)
    cifar_std = torch.tensor(NORMALISATIONS["cifar10"].std).view(1, 3, 1, 1)
    torch.testing.assert_close(data.ood_set("cifar100").x * cifar_std + cifar_mean,
                               torch.from_numpy(hundred["test"][0]) / 255.0)
    test = torch.from_numpy(clean["test"][0]) / 255.0
    torch.testing.assert_close(data.splits(0).x_test * cifar_std + cifar_mean, test)
    snow = data.corrupted_test("snow", 3)
    torch.testing.assert_close(snow.x[:, 0, 0, 0] * cifar_std[0, 0, 0, 0]
                               + cifar_mean[0, 0, 0, 0], (120 + torch.arange(12, 18)) / 255.0)
    torch.testing.assert_close(data.corrupted_test("snow", 0).x, data.splits(0).x_test)


def test_absent_optional_ood_set_is_left_out_and_named(grey_root):
    data = node(grey_root, ood=["fashion_mnist", "emnist_digits_torchvision"],
                optional_ood=["emnist_digits_torchvision"])
    assert data.available_ood == ("fashion_mnist",)
    message = data.missing_ood()["emnist_digits_torchvision"]
    assert message.startswith("image data set 'emnist_digits_torchvision' (test split) not "
                              f"found: put emnist-digits-test-images-idx3-ubyte.gz, "
                              f"emnist-digits-test-labels-idx1-ubyte.gz in {grey_root}/emnist/")
    assert "\n" not in message
    present = node(grey_root, optional_ood=["kmnist"])
    assert present.available_ood == ("fashion_mnist", "kmnist") and present.missing_ood() == {}
    with pytest.raises(ConfigError, match=r"^dataset.optional_ood='svhn' is not valid; choose "
                                          r"one of: fashion_mnist, kmnist$"):
        node(grey_root, optional_ood=["svhn"])
    with pytest.raises(ImageDataMissingError, match=r"^image data set 'emnist_digits'"):
        node(grey_root, ood=["emnist_digits"])


def test_corrupted_mixture_draws_with_replacement_from_every_corruption(tmp_path):
    rng = np.random.default_rng(4)
    clean = write_cifar(tmp_path / "cifar10/cifar-10-batches-py", rng, per_file=6)
    snow, labels = write_cifar10_c(tmp_path / "cifar10_c", "snow", per_severity=6)
    np.save(tmp_path / "cifar10_c" / "fog.npy", snow + 1)  # fog = snow's pixels + 1
    data = ImageClassificationData(name="c", images="cifar10", normalisation="unit",
                                   root=str(tmp_path))
    generator = torch.Generator().manual_seed(711)
    mixed = {s: data.corrupted_mixture(s, ["snow", "fog"], 30, generator) for s in (0, 3)}
    expected = torch.Generator().manual_seed(711)
    at_0 = torch.randint(6, (30,), generator=expected)
    at_3 = torch.randint(12, (30,), generator=expected)
    torch.testing.assert_close(mixed[0].x, torch.from_numpy(clean["test"][0])[at_0] / 255.0)
    assert torch.equal(mixed[0].y, torch.from_numpy(clean["test"][1]).long()[at_0])
    rows, fog = at_3 % 6, at_3 // 6
    # Severity 3 holds file rows 12..17, whose pixels are 40 x 3 + file row (+ 1 on fog).
    pixel = (120 + 12 + rows + fog).double() / 255.0
    torch.testing.assert_close(mixed[3].x[:, 1, 5, 7].double(), pixel, atol=1e-6, rtol=0)
    assert torch.equal(mixed[3].y, torch.from_numpy(labels[12 + rows.numpy()]).long())
    assert len(set(at_3.tolist())) < 30  # with replacement: some images drawn twice
    with pytest.raises(ConfigError, match=r"^corruptions='smog' is not valid"):
        data.corrupted_mixture(1, ["smog"], 3, generator)
