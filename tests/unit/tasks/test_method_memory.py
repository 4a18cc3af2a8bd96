"""Table 5's memory task: names of buffers and parts, and the MAP row of WRN-16-4 measured."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bench.harness.finished_jobs import apply_scale_overrides
from bench.tasks.method_memory import is_buffer, last_layer_width, parts_bytes, run
from tests.helpers import compose_config

# WRN-16-4: 2,748,890 parameters; 13 BatchNorm layers, each a running mean and variance
# (3,616 floats in all) and an int64 batch counter.
WRN_PARAMETERS, WRN_BN_FLOATS, WRN_BN_LAYERS = 2_748_890, 3_616, 13
# The Redux LeNet: 44,426 float32 parameters, no buffers; last layer 84 -> 10 (850 values).
# laplace-torch's K-FAC: weight factors K^2 and H^2, bias factor K^2, their eigenvectors (the
# same sizes), H + 2K eigenvalues and two deltas; four scalars (prior precision, prior mean,
# noise, loss).
LENET_PARAMETERS, LENET_H, LENET_K = 44_426, 84, 10
LENET_LAST = LENET_H * LENET_K + LENET_K
LENET_KRON = 2 * (2 * LENET_K ** 2 + LENET_H ** 2) + LENET_H + 2 * LENET_K + 2


def test_buffers_are_found_by_the_end_of_their_names():
    names = {"features.1.bn1.running_mean", "bn.num_batches_tracked"}
    assert is_buffer("members.3.features.1.bn1.running_mean", names)
    assert is_buffer("bn.num_batches_tracked", names)
    assert not is_buffer("features.1.bn1.running_mean_sq", names)
    assert not is_buffer("xbn.num_batches_tracked", names)


def test_parts_count_each_storage_once_where_it_first_appears():
    weight, factor = torch.zeros(3, 4), torch.zeros(5, dtype=torch.float64)
    tensors = {"la.model.fc.weight": weight, "la.params.0": weight.detach(),
               "la.H.eigenvectors.0.0": factor, "la.mean": torch.zeros(2)}
    assert parts_bytes(tensors) == {"la.model": 48, "la.H": 40, "la.mean": 8}


def test_last_layer_width_is_the_input_of_the_last_linear():
    network = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    assert last_layer_width(network) == 5


@pytest.mark.second_tier
def test_map_row_of_wrn16_4_is_its_parameters_and_batch_norm_buffers(tmp_path):
    cfg = compose_config(["experiment=laplace_redux/table-5", "scale=cpu", "seed=6",
                          "method=map_classifier", f"results_dir={tmp_path}"])
    result = run(cfg)
    cells = {(c.row, c.column): c.value for c in result.cells}
    buffers = WRN_BN_FLOATS * 4 + WRN_BN_LAYERS * 8
    assert cells[("MAP", "bytes")] == WRN_PARAMETERS * 4 + buffers
    assert cells[("MAP", "mem_wrn16-4_cifar10")] == (WRN_PARAMETERS * 4 + buffers) / 1e6
    assert cells[("MAP", "buffers_mb")] == buffers / 1e6
    assert cells[("MAP", "analytic_mb")] == WRN_PARAMETERS * 4 / 1e6
    assert result.fitted["n_parameters"] == WRN_PARAMETERS
    assert result.fitted["last_layer_width"] == 256
    assert [p.name for p in tmp_path.iterdir()] == []  # the scratch folder is gone


@pytest.mark.second_tier
def test_la_rows_are_the_network_once_plus_the_laplace_state_and_as_held_twice(tmp_path):
    overrides = ["experiment=laplace_redux/table-5", "scale=smoke", "seed=6",
                 "method=laplace_classifier", f"results_dir={tmp_path}"]
    result = run(apply_scale_overrides(compose_config(overrides), overrides))
    cells = {(c.row, c.column): c.value for c in result.cells}
    network = LENET_PARAMETERS * 4
    state = {"LA": 4 * (LENET_LAST + LENET_KRON + 4),
             "LA*": 4 * (LENET_LAST + 2 * LENET_LAST ** 2 + 4)}
    for row, laplace_state in state.items():
        # What the LA needs to predict: its own copy of the network and its Laplace state.
        assert cells[(row, "bytes")] == network + laplace_state
        assert cells[(row, "mem_lenet_mnist")] == (network + laplace_state) / 1e6
        # As laplace-torch holds it: the harness's copy of the parameters (la.params) too.
        held = f"{row} (as held, incl. the harness's copy)"
        assert cells[(held, "bytes")] == 2 * network + laplace_state
        assert cells[(held, "unread_mb")] == network / 1e6
        assert result.fitted["parts_bytes"][held]["la.params"] == network
        assert "la.params" not in result.fitted["parts_bytes"][row]
    assert cells[("LA", "analytic_mb")] == 4 * (LENET_PARAMETERS + LENET_H ** 2
                                                 + LENET_K ** 2) / 1e6


def test_methods_that_build_their_network_get_the_experiments_model_and_overrides():
    from bench.tasks.method_memory import memory_method_node
    from bench.training.network_store import TrainingRecipe

    cfg = compose_config(["experiment=laplace_redux/table-5", "method=bayes_by_backprop"])
    values = {"model": {"name": "wrn16_4", "options": {"dropout": 0.3}},
              "stages": [{"epochs": 1, "lr": 0.1, "batch_size": 8}],
              "dataset": {"name": "cifar10", "preprocessing": "unit",
                          "image_shape": [3, 32, 32], "train_size": 8}}
    node = memory_method_node(cfg, TrainingRecipe.from_dict(values))
    assert node.model.name == "wrn16_4"
    assert node.model.options == {"dropout": 0.3}
    assert node.epochs == 1
