"""Generated images take a real data set's shape and classes, drawn from the seed."""

from __future__ import annotations

import pytest
import torch

from bench.datasets.generated_images import GeneratedImages
from bench.harness.errors import ConfigError


def test_images_have_the_named_sets_shape_and_classes_and_follow_the_seed():
    data = GeneratedImages("generated_cifar10", "cifar10", n_train=5, n_test=3)
    splits = data.splits(seed=4)
    assert splits.x_train.shape == (5, 3, 32, 32) and splits.x_test.shape == (3, 3, 32, 32)
    assert splits.y_train.dtype == torch.int64 and int(splits.y_train.max()) < 10
    assert len(splits.x_val) == 0 and splits.test_indices.tolist() == [0, 1, 2]
    again = data.splits(seed=4)
    assert torch.equal(again.x_train, splits.x_train) and torch.equal(again.y_test, splits.y_test)
    assert not torch.equal(data.splits(seed=5).x_train, splits.x_train)
    assert GeneratedImages("g", "mnist").splits(0).x_train.shape[1:] == (1, 28, 28)


@pytest.mark.parametrize(("arguments", "message"), [
    ({"images": "imagenet"}, "dataset.images='imagenet'"),
    ({"n_train": 0}, "dataset.n_train=0")])
def test_bad_values_name_their_key(arguments, message):
    with pytest.raises(ConfigError, match=message):
        GeneratedImages("g", **arguments)
