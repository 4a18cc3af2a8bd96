"""Permuted-image tasks: each task's images are the originals under one fixed bijection of the
pixels (the authors' numpy draw), the same for training and test images and on every build;
bad settings stop the node with one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.datasets.continual_tasks import PermutedImageTasks, permuted_task
from bench.harness.errors import ConfigError
from bench.harness.job_execution import check_dataset_node
from tests.helpers import compose_config
from tests.unit.datasets.image_fixtures import write_mnist_like


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    folder = tmp_path_factory.mktemp("permuted")
    write_mnist_like(folder / "mnist", np.random.default_rng(3), sizes=(30, 12))
    return folder


def tasks(root, **settings) -> PermutedImageTasks:
    return PermutedImageTasks(name="permuted_mnist", images="mnist", root=str(root), **settings)


def authors_permutation(task: int) -> list[int]:
    """The code's draw: ``np.random.seed(task)``, then shuffle ``arange(784)`` (not task 0)."""
    order = np.arange(784)
    if task > 0:
        np.random.RandomState(task).shuffle(order)
    return order.tolist()


def test_each_task_is_a_fixed_bijection_of_the_pixels(root):
    splits = tasks(root).splits(seed=0)
    again = tasks(root).splits(seed=0)
    seen = []
    for task in range(4):
        for images, rebuilt in ((splits.x_train, again.x_train), (splits.x_test, again.x_test)):
            permuted = permuted_task(images, task)
            assert permuted.shape == images.shape
            assert torch.equal(permuted, permuted_task(rebuilt, task))  # deterministic
            flat, original = permuted.flatten(1), images.flatten(1)
            # Every image keeps its pixel values, only their places move.
            assert torch.equal(flat.sort(dim=1).values, original.sort(dim=1).values)
            order = authors_permutation(task)
            assert sorted(order) == list(range(784))  # a bijection
            assert torch.equal(flat, original[:, order])
        seen.append(permuted_task(splits.x_train, task))
    assert torch.equal(seen[0], splits.x_train)  # task 1 is MNIST itself
    assert all(not torch.equal(seen[a], seen[b]) for a in range(4) for b in range(a + 1, 4))


def test_task_names_and_evaluation_schedule(root):
    every, last = tasks(root, n_tasks=3), tasks(root, n_tasks=3, evaluate_after="last_task")
    assert [every.task_name(t) for t in range(3)] == ["mnist_permuted_0", "mnist_permuted_1",
                                                      "mnist_permuted_2"]
    assert [every.evaluated_after(t) for t in range(3)] == [True, True, True]
    assert [last.evaluated_after(t) for t in range(3)] == [False, False, True]


@pytest.mark.parametrize("setting, message", [
    ({"n_tasks": 0}, "dataset.n_tasks=0 is not valid; it must be an integer >= 1"),
    ({"n_tasks": 2.5}, "dataset.n_tasks=2.5 is not valid"),
    ({"evaluate_after": "never"}, "dataset.evaluate_after='never' is not valid; choose one of: "
                                  "every_task, last_task"),
])
def test_bad_settings_stop_with_one_line_naming_the_key(root, setting, message):
    with pytest.raises(ConfigError, match=message):
        tasks(root, **setting)


def test_the_experiment_node_is_checked_before_the_job_starts():
    cfg = compose_config(["experiment=laplace_redux/continual-learning", "scale=smoke",
                          "dataset.n_tasks=0"])
    with pytest.raises(ConfigError, match="dataset.n_tasks=0"):
        check_dataset_node(cfg)
