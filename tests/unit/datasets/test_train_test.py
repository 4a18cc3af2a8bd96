"""The fixed toy sets drawn by (seed, n) (:meth:`bench.datasets.train_test.TrainTest.drawn`)."""

from __future__ import annotations

import numpy as np
import torch

from bench.datasets.train_test import TrainTest


def test_drawn_calls_the_draw_with_each_seed_and_size_and_keeps_float64():
    calls = []

    def draw(seed: int, n: int):
        calls.append((seed, n))
        return np.full((n, 2), seed, dtype=np.float32), np.arange(n)

    sets = TrainTest.drawn("toy", draw, train=(6, 3), test=(5, 2))
    assert calls == [(6, 3), (5, 2)]
    assert sets.name == "toy" and sets.input_dim == 2
    assert torch.equal(sets.x_train, torch.full((3, 2), 6.0, dtype=torch.float64))
    assert torch.equal(sets.y_test, torch.tensor([0.0, 1.0], dtype=torch.float64))
    assert {t.dtype for t in (sets.x_train, sets.y_train, sets.x_test, sets.y_test)} == {
        torch.float64}
