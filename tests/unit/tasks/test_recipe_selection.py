"""The held-out split and the constant predictor of the MAP-recipe selection."""

from __future__ import annotations

import math

import pytest
import torch

from bench.harness.errors import ConfigError
from bench.tasks.recipe_selection import constant_scores, held_out_split, split_name


def test_held_out_split_is_a_seeded_partition():
    fit, held = held_out_split(100, 20, split_seed=0)
    assert len(held) == 20 and len(fit) == 80
    assert sorted(torch.cat([fit, held]).tolist()) == list(range(100))
    again = held_out_split(100, 20, split_seed=0)
    assert torch.equal(again[1], held)
    assert not torch.equal(held_out_split(100, 20, split_seed=1)[1], held)


@pytest.mark.parametrize("val_size", [0, 100, 2.5, True])
def test_bad_held_out_size_is_one_line_naming_the_key(val_size):
    with pytest.raises(ConfigError, match=r"^selection\.val_size="):
        held_out_split(100, val_size, split_seed=0)


def test_constant_predictor_scores_the_class_frequencies_and_their_majority_class():
    fit = torch.tensor([0, 0, 0, 1])
    held = torch.tensor([0, 1, 1, 1])
    nll, acc = constant_scores(fit, held, num_classes=2)
    assert nll == pytest.approx(-(math.log(0.75) + 3 * math.log(0.25)) / 4)
    assert acc == 0.25


def test_the_fit_part_has_its_own_store_name():
    assert split_name("mnist", 10000, 0) != split_name("mnist", 10000, 1) != "mnist"
    assert "/" not in split_name("mnist", 10000, 0)
