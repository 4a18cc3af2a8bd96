"""ClassSubsetImageData: binary MNIST 4 vs 9 (GGN thesis, notes 2.3) on generated IDX files and
on the shared MNIST files when present: counts, the 4 -> 0 / 9 -> 1 labels, seeded subsets and
one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from bench.datasets.class_subset import ClassSubsetImageData, class_indices, relabel
from bench.datasets.vision import ImageDataMissingError
from bench.harness.errors import ConfigError
from tests.helpers import SHARED_DATA, compose_config
from tests.unit.datasets.image_fixtures import write_mnist_like


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """MNIST-format files with 200 training and 100 test images, labels cycling 0..9 (20 and 10
    of each digit), and the arrays written."""
    root = tmp_path_factory.mktemp("mnist-4v9")
    written = write_mnist_like(root / "mnist", np.random.default_rng(3), sizes=(200, 100))
    return root, written


def four_nine(root, **values) -> ClassSubsetImageData:
    options = {"name": "mnist_4v9", "images": "mnist", "classes": [4, 9], "n_train": 30,
               "root": str(root)} | values
    return ClassSubsetImageData(**options)


def test_helpers_select_and_relabel_in_the_order_given():
    labels = torch.tensor([9, 4, 1, 4, 9, 7])
    assert class_indices(labels, (4, 9)).tolist() == [0, 1, 3, 4]
    assert relabel(torch.tensor([9, 4, 4, 9]), (4, 9)).tolist() == [1, 0, 0, 1]
    assert relabel(torch.tensor([9, 4]), (9, 4)).tolist() == [0, 1]
    with pytest.raises(ValueError, match="outside the classes"):
        relabel(torch.tensor([4, 3]), (4, 9))


def test_counts_labels_and_pixels_match_the_files(generated):
    root, written = generated
    splits = four_nine(root).splits(seed=0)
    train_images, train_labels = written["train"]
    test_images, test_labels = written["test"]
    assert splits.x_train.shape == (30, 1, 28, 28) and len(splits.y_train) == 30
    # Every test 4 and 9, in file order: 10 + 10 of the 100 generated images.
    expected_test = np.flatnonzero((test_labels == 4) | (test_labels == 9))
    assert splits.test_indices.tolist() == expected_test.tolist()
    assert len(splits.x_val) == 0 and len(splits.y_val) == 0
    for x, y, idx, images, labels in (
            (splits.x_train, splits.y_train, splits.train_indices, train_images, train_labels),
            (splits.x_test, splits.y_test, splits.test_indices, test_images, test_labels)):
        original = labels[idx.numpy()]
        assert set(original.tolist()) <= {4, 9}
        assert y.tolist() == (original == 9).astype(int).tolist()   # 9 -> 1, 4 -> 0
        assert torch.equal(x, torch.from_numpy(images[idx.numpy()]).unsqueeze(1).float() / 255)
    assert splits.y_train.dtype == torch.long and set(splits.y_train.tolist()) == {0, 1}


def test_the_training_subset_is_drawn_from_the_seed(generated):
    root, _ = generated
    data = four_nine(root)
    first, again = data.splits(0).train_indices, four_nine(root).splits(0).train_indices
    assert torch.equal(first, again)
    assert not torch.equal(first, data.splits(1).train_indices)
    assert torch.equal(first, first.sort().values) and len(set(first.tolist())) == 30
    everything = four_nine(root, n_train=None).splits(0)
    assert len(everything.y_train) == 40 and int(everything.y_train.sum()) == 20
    assert len(four_nine(root, n_test=7).splits(0).y_test) == 7


def test_bad_values_stop_with_one_line_naming_the_key(generated, tmp_path):
    root, _ = generated
    for values, key in (({"classes": [4]}, "dataset.classes"),
                        ({"classes": [4, 4]}, "dataset.classes"),
                        ({"classes": [4, 10]}, "dataset.classes"),
                        ({"n_train": 0}, "dataset.n_train"),
                        ({"images": "mnist9"}, "dataset.images")):
        with pytest.raises(ConfigError, match=key) as caught:
            four_nine(root, **values)
        assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="dataset.n_train=41 is more than the 40 train"):
        four_nine(root, n_train=41).splits(0)
    with pytest.raises(ImageDataMissingError, match="mnist"):
        four_nine(tmp_path)


def test_the_config_node_builds_the_thesis_dataset():
    node = compose_config(["dataset=mnist_4v9"]).dataset
    data = instantiate(node)
    assert isinstance(data, ClassSubsetImageData)
    assert data.classes == (4, 9) and data.n_train == 3000 and data.n_test is None


@pytest.mark.skipif(not (SHARED_DATA / "mnist").is_dir(), reason="shared MNIST files absent")
def test_real_mnist_gives_3000_training_images_and_1991_test_images():
    data = four_nine(SHARED_DATA, n_train=3000)
    splits = data.splits(0)
    assert splits.x_train.shape == (3000, 1, 28, 28)
    # MNIST's test set holds 982 fours and 1009 nines.
    assert len(splits.y_test) == 1991 and int(splits.y_test.sum()) == 1009
    assert 0.0 <= float(splits.x_train.min()) and float(splits.x_train.max()) <= 1.0
    with pytest.raises(ConfigError, match="more than the 11791 train images"):
        four_nine(SHARED_DATA, n_train=11792).splits(0)


def test_missing_files_are_one_line_naming_both_splits_and_the_download_switch(tmp_path):
    with pytest.raises(ImageDataMissingError) as caught:
        four_nine(tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("image data set 'mnist' (train and test splits) not found: put ")
    assert f" in {tmp_path}/mnist/ " in message
    assert message.endswith("; or set dataset.download=true to let torchvision fetch them")
