"""The settings sub-nodes method nodes share (bench.methods.settings): each is validated once,
by its own dataclass, and a bad value names its full key in one line."""

from __future__ import annotations

import pytest
import torch

from bench.harness.errors import ConfigError
from bench.methods.baselines.bayes_by_backprop import BayesByBackprop
from bench.methods.baselines.classifier_ensemble import ClassifierEnsemble
from bench.methods.baselines.cyclical_sghmc import CyclicalSGHMC
from bench.methods.baselines.map_classifier import MapClassifier
from bench.methods.baselines.swag import SWAG
from bench.methods.laplace.classification import LaplaceTorchClassifier
from bench.methods.laplace.continual import ContinualLaplace
from bench.methods.laplace.last_layer_checkpoint import CheckpointLastLayerLaplace
from bench.methods.laplace.online_marglik import OnlineMarglikLaplace
from bench.methods.laplace.tempered import TemperedLaplace
from bench.methods.settings import ModelSettings, PredictionSettings, settings_node
from bench.models.classifiers import build_classifier

WITH_PREDICTION = [BayesByBackprop, ClassifierEnsemble, CyclicalSGHMC, MapClassifier, SWAG,
                   LaplaceTorchClassifier, ContinualLaplace, CheckpointLastLayerLaplace,
                   OnlineMarglikLaplace, TemperedLaplace]
WITH_MODEL = [BayesByBackprop, CyclicalSGHMC, ContinualLaplace, OnlineMarglikLaplace]


@pytest.mark.parametrize("value", [0, -3, 1.5, True, "8", None])
def test_a_bad_prediction_batch_size_names_the_full_key(value):
    with pytest.raises(ConfigError, match=r"^method\.prediction\.batch_size=.* is not valid; "
                                          r"it must be a positive integer$"):
        PredictionSettings(batch_size=value)


@pytest.mark.parametrize("cls", WITH_PREDICTION, ids=lambda c: c.__name__)
def test_every_method_reads_its_prediction_node_through_the_one_dataclass(cls):
    method = cls(prediction={"batch_size": 5})
    assert method.prediction == PredictionSettings(batch_size=5)
    with pytest.raises(ConfigError, match=r"^method\.prediction\.batch_size=0 is not valid"):
        cls(prediction={"batch_size": 0})
    with pytest.raises(ConfigError, match=r"^method\.prediction\.chunk is not a setting of "
                                          r"method\.prediction; choose from: batch_size$"):
        cls(prediction={"chunk": 5})


@pytest.mark.parametrize("cls", WITH_MODEL, ids=lambda c: c.__name__)
def test_every_method_that_builds_a_network_reads_its_model_node(cls):
    method = cls(model={"name": "wrn16_4", "options": {"widen": 1}})
    assert method.model == ModelSettings(name="wrn16_4", options={"widen": 1})
    with pytest.raises(ConfigError, match=r"^method\.model\.name='vgg' is not valid; choose "
                                          r"one of: "):
        cls(model={"name": "vgg"})
    with pytest.raises(ConfigError, match=r"^method\.model\.options\.width is not an option of "
                                          r"lenet_redux; its options: none$"):
        cls(model={"name": "lenet_redux", "options": {"width": 3}})


def test_a_model_node_that_is_not_a_mapping_names_its_key():
    with pytest.raises(ConfigError, match=r"^method\.model='mlp' is not valid; it must be a "
                                          r"mapping of name, options$"):
        settings_node(ModelSettings, "mlp")
    with pytest.raises(ConfigError, match=r"^method\.model\.options=\[1\] is not valid"):
        ModelSettings(name="mlp", options=[1])


def test_the_model_node_builds_the_network_of_the_fit_seed_and_keeps_the_recipe_names():
    """Same weights as building the classifier from the seed's network stream; the stored-state
    recipe keeps the pre-sub-node names, so stored states keep their hashes."""
    from bench.harness.rng import derived_seed, make_generator

    model = ModelSettings(name="mlp")
    built = model.build(seed=3, num_classes=10, in_channels=1)
    expected = build_classifier("mlp", make_generator(derived_seed(3, spawn_key=(0,))),
                                num_classes=10, in_channels=1)
    for a, b in zip(built.parameters(), expected.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert model.recipe() == {"network_model": "mlp", "network_options": {}}
