"""Toys whose sets are fixed by their own seeds
(:class:`~bench.datasets.train_test.FixedToySets`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from bench.datasets.train_test import FixedToySets
from bench.harness.errors import ConfigError


@dataclass
class ConstantToy(FixedToySets):
    """Inputs filled with the seed, targets 0..n-1; records each draw."""

    name: str = "toy"
    calls: list = field(default_factory=list)

    def draw(self, seed: int, n: int):
        self.calls.append((seed, n))
        return np.full((n, 2), seed, dtype=np.float32), np.arange(n)


def test_splits_draw_each_set_from_its_own_seed_and_ignore_the_job_seed():
    toy = ConstantToy(n_train=3, n_test=2)
    sets = toy.splits(seed=123)
    assert toy.calls == [(6, 3), (5, 2)]
    assert sets.name == "toy" and sets.input_dim == 2
    assert torch.equal(sets.x_train, torch.full((3, 2), 6.0, dtype=torch.float64))
    assert torch.equal(sets.x_test, torch.full((2, 2), 5.0, dtype=torch.float64))
    assert torch.equal(sets.y_test, torch.tensor([0.0, 1.0], dtype=torch.float64))
    assert {t.dtype for t in (sets.x_train, sets.y_train, sets.x_test, sets.y_test)} == {
        torch.float64}


@pytest.mark.parametrize("key", ["n_train", "n_test"])
def test_set_sizes_must_be_positive(key):
    with pytest.raises(ConfigError, match=f"dataset.{key}"):
        ConstantToy(**{key: 0})
