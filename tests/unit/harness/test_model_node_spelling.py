"""A training recipe names its network by the ``conf/model`` node (``network.model: {name,
options}``) and a method its own by ``method.model`` beside ``method.prediction``; the records
and stored networks made before these nodes keep their config hash and their recipe hash
(bench.harness.records.canonical_spelling)."""

from __future__ import annotations

import copy

import pytest
from omegaconf import OmegaConf

from bench.harness.finished_jobs import job_identity
from bench.harness.records import config_hash
from bench.training.network_store import recipe_for, recipe_hash
from tests.helpers import compose_config

STAGE = {"epochs": 1, "lr": 0.1, "batch_size": 20, "optimizer": "sgd", "momentum": 0.9,
         "nesterov": True, "weight_decay": 5.0e-4, "schedule": "cosine"}
IDENTITY = {"name": "cifar10", "preprocessing": "cifar10_redux", "image_shape": [3, 32, 32],
            "train_size": 40}

# (job overrides, the network node as the experiment wrote it before the model node): with
# options, without any (no model_options key at all) and with null options.
OLD_SPELLINGS = [
    (["experiment=laplace_redux/table-4", "scale=smoke", "method=classifier_ensemble"],
     {"_target_": "bench.training.network_store.TrainingRecipe.from_dict", "model": "wrn16_4",
      "num_classes": 10, "model_options": {"dropout": 0.3, "widen": 1}, "stages": [STAGE]}),
    (["experiment=laplace_redux/table-3", "scale=cpu", "method=classifier_ensemble"],
     {"_target_": "bench.training.network_store.TrainingRecipe.from_dict",
      "model": "lenet_redux", "num_classes": 10,
      "stages": [{"epochs": 100, "lr": 1.0e-3, "batch_size": 128, "optimizer": "adam",
                  "weight_decay": 5.0e-4, "schedule": "cosine"}]}),
    (["experiment=laplace_redux/table-5", "scale=smoke", "method=map_classifier"],
     {"model": "lenet_redux", "num_classes": 10, "model_options": None,
      "stages": [dict(STAGE, batch_size=128)]}),
]


def resolved_job(overrides: list[str]) -> dict:
    """The job's config as it is hashed (scale overrides applied, no hydra node)."""
    return job_identity(compose_config(overrides), overrides).resolved


def with_network(config: dict, node: dict) -> dict:
    """``config`` with its ``network`` (and the DE's copy, ``method.network``) set to ``node``."""
    config = copy.deepcopy(config)
    config["network"] = copy.deepcopy(node)
    if "network" in config["method"]:
        config["method"]["network"] = copy.deepcopy(node)
    return config


@pytest.mark.parametrize(("overrides", "old_node"), OLD_SPELLINGS)
def test_the_model_node_and_the_old_spelling_hash_alike(overrides, old_node):
    new = resolved_job(overrides)
    old = with_network(new, old_node)
    assert isinstance(new["network"]["model"], dict) and "model_options" not in new["network"]
    assert new["network"] != old["network"]
    assert config_hash(new) == config_hash(old)
    assert (recipe_hash(recipe_for(new["network"], IDENTITY))
            == recipe_hash(recipe_for(old["network"], IDENTITY)))


def test_a_recipe_hash_follows_the_model_and_its_options():
    new = resolved_job(OLD_SPELLINGS[0][0])
    wider = copy.deepcopy(new)
    wider["network"]["model"]["options"]["widen"] = 2
    other = with_network(new, dict(OLD_SPELLINGS[0][1], model_options={"dropout": 0.3}))
    hashes = {config_hash(new), config_hash(wider), config_hash(other)}
    assert len(hashes) == 3
    assert recipe_hash(recipe_for(wider["network"], IDENTITY)) != recipe_hash(
        recipe_for(new["network"], IDENTITY))


def test_empty_and_null_options_keep_their_old_spellings_apart():
    node = {"model": {"name": "lenet_redux", "options": {}}, "stages": [STAGE]}
    cleared = {"model": {"name": "lenet_redux", "options": None}, "stages": [STAGE]}
    assert config_hash({"network": node}) == config_hash(
        {"network": {"model": "lenet_redux", "stages": [STAGE]}})
    assert config_hash({"network": cleared}) == config_hash(
        {"network": {"model": "lenet_redux", "model_options": None, "stages": [STAGE]}})
    assert config_hash({"network": node}) != config_hash({"network": cleared})


def test_a_methods_own_model_node_is_hashed_as_its_old_keys_not_as_a_recipe():
    node = {"model": {"name": "mlp", "options": {}}, "epochs": 2}
    assert config_hash({"method": node}) != config_hash({"method": {"model": "mlp",
                                                                    "epochs": 2}})
    assert config_hash({"method": node}) == config_hash(
        {"method": {"network_model": "mlp", "network_options": {}, "epochs": 2}})


@pytest.mark.parametrize("method", ["bayes_by_backprop", "laplace_classifier"])
@pytest.mark.second_tier
def test_a_methods_model_and_prediction_nodes_hash_as_before_them(method):
    """The method sub-nodes of 04b19a0 (method.model, method.prediction): a job hashes as the
    records made before them (network_model / network_options, predict_batch_size), which a
    rerun then finds; the Table 2 paper scale override's prediction node too."""
    new = resolved_job(["experiment=laplace_redux/table-3", "scale=cpu", f"method={method}"])
    old = copy.deepcopy(new)
    prediction = old["method"].pop("prediction")
    old["method"]["predict_batch_size"] = prediction["batch_size"]
    if "model" in old["method"]:
        model = old["method"].pop("model")
        old["method"]["network_model"] = model["name"]
        old["method"]["network_options"] = model["options"]
    assert old != new
    assert config_hash(old) == config_hash(new)
    table_2 = resolved_job(["experiment=laplace_redux/table-2", "scale=cpu"])
    respelled = copy.deepcopy(table_2)
    respelled["scale_overrides"]["paper"]["method"] = {"predict_batch_size": 256}
    assert table_2["scale_overrides"]["paper"]["method"] == {"prediction": {"batch_size": 256}}
    assert config_hash(respelled) == config_hash(table_2)


def test_the_experiments_name_their_recipe_network_by_the_model_group():
    cfg = compose_config(["experiment=generalized_laplace/figure-4", "scale=smoke"])
    cfg = job_identity(cfg, ["scale=smoke"]).cfg
    assert OmegaConf.to_container(cfg.network.model) == {"name": "resnet18",
                                                        "options": {"width": 8}}
    recipe = recipe_for(cfg.network, IDENTITY)
    assert (recipe.model, recipe.model_options) == ("resnet18", (("width", 8),))
