"""Continual-learning task helpers by hand: accuracy-matrix cells and the network's layer widths."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bench.harness.result import TaskResult
from bench.harness.rng import make_generator
from bench.models.classifiers import build_classifier
from bench.tasks.continual_learning import add_matrix_cells, network_layers


def test_matrix_cells_are_the_evaluated_rows_as_fractions():
    nan = math.nan
    matrix = torch.tensor([[0.5, nan, nan], [nan, nan, nan], [0.25, 0.75, 1.0]],
                          dtype=torch.float64)
    result = TaskResult()
    add_matrix_cells(result, "KFAC", "map/", matrix)
    cells = {(c.row, c.column): c.value for c in result.cells}
    assert cells == {("KFAC", "map/after=1/task=1"): 0.5, ("KFAC", "map/after=1/mean"): 0.5,
                     ("KFAC", "map/after=3/task=1"): 0.25, ("KFAC", "map/after=3/task=2"): 0.75,
                     ("KFAC", "map/after=3/task=3"): 1.0,
                     ("KFAC", "map/after=3/mean"): pytest.approx(2 / 3)}


def test_network_layers_of_the_redux_mlp():
    network = build_classifier("mlp", make_generator(0))
    assert network_layers(network) == [784, 100, 100, 10]
    assert sum(p.numel() for p in network.parameters()) == 89_610
    assert any(isinstance(m, nn.ReLU) for m in network.modules())
