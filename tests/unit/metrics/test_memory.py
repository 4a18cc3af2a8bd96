"""Bytes of stored tensors (each storage once), the paper's MB, its formulas, the tensor walk."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bench.harness.errors import ConfigError
from bench.metrics.memory import analytic_count, held_tensors, megabytes, stored_bytes

WRN_PARAMETERS = 2_748_890


def test_bytes_are_numel_times_element_size_per_dtype():
    tensors = {"a": torch.zeros(3, 4), "b": torch.zeros(5, dtype=torch.float64),
               "c": torch.tensor(7), "d": torch.zeros(2, 2, dtype=torch.float16)}
    assert stored_bytes(tensors) == 12 * 4 + 5 * 8 + 1 * 8 + 4 * 2
    assert stored_bytes({}) == 0


def test_a_shared_storage_counts_once():
    base = torch.zeros(10)
    layer = nn.Linear(3, 2)
    shared = {"base": base, "view": base[2:5], "reshaped": base.view(2, 5),
              "weight": layer.weight, "state": layer.state_dict()["weight"],
              "detached": layer.weight.detach()}
    assert stored_bytes(shared) == 10 * 4 + 6 * 4
    assert stored_bytes({"base": base, "copy": base.clone()}) == 2 * 10 * 4


def test_a_slice_alone_counts_the_storage_it_keeps_alive():
    assert stored_bytes({"slice": torch.zeros(100)[:3]}) == 100 * 4


def test_megabytes_are_decimal_as_in_the_paper():
    # 2,748,890 float32 = 10.996 MB, printed 11 (10.49 MiB would print 10).
    assert megabytes(WRN_PARAMETERS * 4) == pytest.approx(10.99556)
    assert round(megabytes(WRN_PARAMETERS * 4)) == 11


@pytest.mark.parametrize(("coefficients", "printed"), [
    ({"M": 1}, 11), ({"M": 1, "H2": 1, "K2": 1}, 12), ({"M": 2}, 22), ({"M": 5}, 55),
    ({"M": 12}, 132), ({"M": 40}, 440)])
def test_the_paper_formulas_rounded_up_give_its_printed_values(coefficients, printed):
    count = analytic_count(coefficients, WRN_PARAMETERS, 256, 10)
    assert math.ceil(megabytes(count * 4)) == printed


def test_la_formula_is_m_plus_h_squared_plus_k_squared():
    assert analytic_count({"M": 1, "H2": 1, "K2": 1}, 100, 7, 3) == 100 + 49 + 9
    with pytest.raises(ConfigError, match="memory.analytic term 'R'"):
        analytic_count({"R": 40}, 100, 7, 3)


class Factors:
    """A stand-in for a library object holding tensors in nested containers."""

    def __init__(self) -> None:
        self.kfacs = [[torch.zeros(3, 3), torch.zeros(5, 5)], [torch.zeros(3, 3)]]
        self.scale = 2.0
        self.owner = self  # a cycle


class Posterior:
    def __init__(self, network: nn.Module) -> None:
        self.model = network
        self.params = list(network.parameters())
        self.factors = Factors()
        self.cache = {"mean": torch.zeros(4)}
        self.data = (torch.zeros(100), torch.zeros(100))


def test_the_walk_finds_nested_tensors_once_and_skips_what_it_is_told():
    network = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    found = held_tensors(Posterior(network), "la", packages=("tests",), skip=("data",))
    assert sorted(found) == [
        "la.cache.mean", "la.factors.kfacs.0.0", "la.factors.kfacs.0.1",
        "la.factors.kfacs.1.0", "la.model.0.bias", "la.model.0.weight", "la.model.1.bias",
        "la.model.1.num_batches_tracked", "la.model.1.running_mean", "la.model.1.running_var",
        "la.model.1.weight"]
    # parameters 6 + 4, BN buffers 2 + 2 floats and one int64, factors 9 + 25 + 9, mean 4
    assert stored_bytes(found) == (10 + 4 + 43 + 4) * 4 + 8


def test_objects_of_other_packages_are_not_entered():
    assert held_tensors(Posterior(nn.Linear(2, 2)), packages=("laplace",)) == {}
