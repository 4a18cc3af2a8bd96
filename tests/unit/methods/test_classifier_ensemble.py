"""DE: member 0 is the base, members k >= 1 are the same recipe from derived seeds in the
network store, the predictive is the mean of the members' softmaxes."""

from __future__ import annotations

import pytest
import torch

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.method_nodes import instantiate_method
from bench.harness.rng import derived_seed, make_generator
from bench.methods.baselines.classifier_ensemble import ClassifierEnsemble, member_seed
from bench.training.network_store import network_dir, recipe_for, trained_network
from tests.helpers import compose_config

N = 20
NETWORK = {"_target_": "bench.training.network_store.TrainingRecipe.from_dict",
           "model": "mlp", "num_classes": 10,
           "stages": [{"epochs": 1, "lr": 1e-3, "batch_size": 10, "optimizer": "adam"}]}


def tiny_data(tmp_path) -> TrainingSet:
    g = make_generator(0)
    return TrainingSet(torch.rand(N, 1, 28, 28, generator=g),
                       torch.randint(0, 10, (N,), generator=g), name="random",
                       preprocessing="uniform", results_dir=str(tmp_path))


def stored_base(data: TrainingSet, seed: int):
    recipe = recipe_for(NETWORK, data.identity())
    return trained_network(recipe, seed, data.train_inputs, data.train_labels, data.results_dir)


def test_member_zero_is_the_base_and_the_predictive_is_the_mean_softmax(tmp_path):
    data = tiny_data(tmp_path)
    base = stored_base(data, seed=6)
    method = ClassifierEnsemble(members=3, network=NETWORK, prediction={"batch_size": 4})
    diagnostics = method.fit(data, seed=6, base=base)
    assert method.networks[0] is base.module
    assert diagnostics["member_seeds"] == [6, derived_seed([6, 1]), derived_seed([6, 2])]
    recipe = recipe_for(NETWORK, data.identity())
    for k in (1, 2):
        assert (network_dir(tmp_path, recipe, member_seed(6, k)) / "weights.pt").exists()
    x = torch.rand(9, 1, 28, 28, generator=make_generator(1))
    with torch.no_grad():
        expected = torch.stack([torch.softmax(net(x), -1) for net in method.networks]).mean(0)
    assert torch.allclose(method.predict(x).probs, expected, atol=1e-6)
    assert not torch.allclose(method.networks[1](x), method.networks[2](x))
    tensors = method.stored_tensors()
    assert len(tensors) == 3 * len(base.module.state_dict())
    for name, tensor in method.networks[2].state_dict().items():
        assert torch.equal(tensors[f"member2.{name}"], tensor)


def test_members_are_stored_and_reused(tmp_path):
    data = tiny_data(tmp_path)
    base = stored_base(data, seed=6)
    first = ClassifierEnsemble(members=2, network=NETWORK).fit(data, seed=6, base=base)
    second = ClassifierEnsemble(members=2, network=None).fit(data, seed=6, base=base)
    assert first["members_trained_now"] == [1] and second["members_trained_now"] == []
    assert first["recipe_hash"] == second["recipe_hash"] == base.recipe_hash


def test_a_network_node_other_than_the_base_recipe_is_a_config_error(tmp_path):
    data = tiny_data(tmp_path)
    base = stored_base(data, seed=6)
    other = NETWORK | {"stages": [{"epochs": 2, "lr": 1e-3, "batch_size": 10}]}
    with pytest.raises(ConfigError, match="^method.network gives recipe hash"):
        ClassifierEnsemble(members=2, network=other).fit(data, seed=6, base=base)


def test_without_a_network_node_the_base_must_be_a_stored_network(tmp_path):
    base = torch.nn.Linear(784, 10)
    with pytest.raises(ConfigError, match="^method.network is null"):
        ClassifierEnsemble(members=2).fit(tiny_data(tmp_path), seed=6, base=base)


def test_batched_and_sequential_members_are_the_same_networks_in_the_same_store(tmp_path):
    data = tiny_data(tmp_path)
    base = stored_base(data, seed=6)
    batched = ClassifierEnsemble(members=3, network=NETWORK)
    assert batched.training == "batched"
    assert batched.fit(data, seed=6, base=base)["members_trained_now"] == [1, 2]
    sequential = ClassifierEnsemble(members=3, network=NETWORK, training="sequential")
    assert sequential.fit(data, seed=6, base=base)["members_trained_now"] == []
    oracle = ClassifierEnsemble(members=3, network=NETWORK, training="sequential")
    oracle_data = tiny_data(tmp_path / "oracle")
    assert oracle.fit(oracle_data, seed=6, base=base)["members_trained_now"] == [1, 2]
    x = torch.rand(9, 1, 28, 28, generator=make_generator(1))
    torch.testing.assert_close(batched.predict(x).probs, oracle.predict(x).probs,
                               rtol=0, atol=1e-6)


@pytest.mark.parametrize(("key", "value"), [("members", 0), ("network", "lenet_redux"),
                                            ("training", "parallel")])
def test_bad_values_name_the_key(key, value):
    with pytest.raises(ConfigError, match=f"^method.{key}="):
        ClassifierEnsemble(**{key: value})


def test_the_config_passes_the_experiments_network_node_as_a_plain_dict():
    network = ("+network={_target_: bench.training.network_store.TrainingRecipe.from_dict, "
               "model: mlp, stages: [{epochs: 1, lr: 0.001, batch_size: 8}]}")
    method = instantiate_method(compose_config(["method=classifier_ensemble", network]).method)
    assert isinstance(method, ClassifierEnsemble) and method.members == 5
    assert method.network == {"_target_": NETWORK["_target_"], "model": "mlp",
                              "stages": [{"epochs": 1, "lr": 0.001, "batch_size": 8}]}
    assert instantiate_method(compose_config(["method=classifier_ensemble"]).method
                              ).network is None
