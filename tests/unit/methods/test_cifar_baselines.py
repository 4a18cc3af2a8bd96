"""Laplace Redux's CIFAR-10 pieces of the methods: BBB as the code's WRN (flipout convs and linear
layer, plain shortcut convs, SGD with Nesterov momentum), the LA fitted on augmented images,
and checkpoints of another architecture refused with one line."""

from __future__ import annotations

import pytest
import torch
from bayesian_torch.layers import Conv2dFlipout, LinearFlipout
from laplace import Laplace
from laplace.curvature import BackPackGGN
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bench.datasets.augmentation import CropFlip
from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.rng import derived_seed, make_generator
from bench.methods.baselines.bayes_by_backprop import BayesByBackprop
from bench.methods.laplace.classification import AUGMENT_STREAM, LaplaceTorchClassifier
from bench.models.classifiers import build_classifier
from bench.training.classifier import TrainingStage
from bench.training.network_store import (
    DatasetIdentity,
    PretrainedWeights,
    TrainingRecipe,
    load_pretrained,
    network_dir,
    trained_network,
)


def cifar_data(results_dir, augmentation: str = "crop_flip", n: int = 16) -> TrainingSet:
    g = make_generator(0)
    return TrainingSet(torch.randn(n, 3, 32, 32, generator=g),
                       torch.randint(0, 10, (n,), generator=g), "cifar10", "cifar10",
                       str(results_dir), "cpu", augmentation)


def wrn_bbb(**changes) -> BayesByBackprop:
    settings = dict(model={"name": "wrn16_4", "options": {"dropout": 0.0, "widen": 1}},
                    deterministic_layers=["shortcut"], optimizer="sgd", lr=0.1, momentum=0.9,
                    nesterov=True, epochs=1, batch_size=8, n_samples=2)
    return BayesByBackprop(**(settings | changes))


def test_bbb_wrn_keeps_the_shortcut_convs_plain_and_every_other_layer_flipout():
    network = wrn_bbb().build(6, 3)
    layers = dict(network.named_modules())
    shortcuts = [name for name in layers if name.endswith("shortcut") and layers[name]]
    assert len(shortcuts) == 2  # the two width changes of WRN-16-k
    assert all(type(layers[name]) is nn.Conv2d for name in shortcuts)
    convs = [m for n, m in layers.items() if isinstance(m, Conv2dFlipout)]
    assert len(convs) == 1 + 2 * 6  # the stem and two convs per block
    assert isinstance(network.fc, LinearFlipout)
    every = wrn_bbb(deterministic_layers=[]).build(6, 3)
    assert not any(type(m) is nn.Conv2d for m in every.modules())


def test_bbb_trains_with_nesterov_sgd_and_names_it_in_its_recipe(tmp_path, monkeypatch):
    built = []
    real = torch.optim.SGD

    def spy(*args, **kwargs):
        built.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.optim, "SGD", spy)
    method, data = wrn_bbb(), cifar_data(tmp_path)
    diagnostics = method.fit(data, 6)
    assert built == [{"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.0}]
    recipe = method.recipe(data)
    assert recipe["optimizer"] == "sgd" and recipe["nesterov"] is True
    assert recipe["deterministic_layers"] == ["shortcut"]
    assert recipe["data"]["augmentation"] == "crop_flip"
    assert diagnostics["epochs"] == 1 and method.predict(data.train_inputs[:3]).probs.shape == (
        3, 10)
    adam = BayesByBackprop().recipe(cifar_data(tmp_path, "none"))
    assert adam["optimizer"] == "adam" and "nesterov" not in adam
    assert "deterministic_layers" not in adam and "augmentation" not in adam["data"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"optimizer": "rmsprop"}, r"^method.optimizer='rmsprop' is not valid; choose one of: adam"),
    ({"optimizer": "adam", "momentum": 0.9, "nesterov": False},
     r"^method.momentum=0.9 / method.nesterov=False are not valid with method.optimizer='adam'"),
    ({"momentum": 0.0}, r"^method.nesterov=True is not valid with method.momentum=0"),
    ({"momentum": 1.0}, r"^method.momentum=1.0 is not valid"),
])
def test_bbb_optimizer_settings_are_one_line_config_errors(changes, message):
    with pytest.raises(ConfigError, match=message):
        wrn_bbb(**changes)


@pytest.mark.second_tier
def test_la_fits_on_each_image_augmented_once_from_the_fit_seed(tmp_path):
    data = cifar_data(tmp_path)
    network = build_classifier("wrn16_4", make_generator(1), widen=1).eval()
    method = LaplaceTorchClassifier(backend="BackPackGGN", batch_size=5)
    method.fit(data, 6, base=network)
    # By hand: the inputs augmented in chunks of the batch size from the fit seed's stream,
    # then laplace-torch's own last-layer KFAC fit on them.
    generator = make_generator(derived_seed(6, spawn_key=(AUGMENT_STREAM,)))
    augment = CropFlip(4, data.augmenter().fill)
    inputs = torch.cat([augment(chunk, generator) for chunk in data.train_inputs.split(5)])
    direct = Laplace(network, "classification", subset_of_weights="last_layer",
                     hessian_structure="kron", backend=BackPackGGN)
    direct.fit(DataLoader(TensorDataset(inputs, data.train_labels), batch_size=5))
    for ours, theirs in zip(method.la.H_facs.kfacs, direct.H_facs.kfacs, strict=True):
        for a, b in zip(ours, theirs, strict=True):
            torch.testing.assert_close(a, b)
    plain = LaplaceTorchClassifier(backend="BackPackGGN", batch_size=5)
    plain.fit(cifar_data(tmp_path, "none"), 6, base=network)
    assert not torch.allclose(plain.la.H_facs.kfacs[0][0], method.la.H_facs.kfacs[0][0])


def wrn_recipe(widen: int) -> TrainingRecipe:
    return TrainingRecipe(model="wrn16_4", model_options={"widen": widen},
                          dataset=DatasetIdentity("cifar10", "cifar10", (3, 32, 32), 8),
                          stages=(TrainingStage(epochs=1, lr=1e-3, batch_size=8),))


def test_a_checkpoint_of_another_width_is_a_one_line_config_error(tmp_path):
    # Same layers, other widths: only the shapes tell (the output layer alone may differ).
    other = build_classifier("wrn16_4", make_generator(0), widen=3)
    path = tmp_path / "wrn16_3.pt"
    torch.save(other.state_dict(), path)
    network = build_classifier("wrn16_4", make_generator(0), widen=2)
    with pytest.raises(ConfigError, match=r"^recipe.pretrained='.*wrn16_3.pt' does not fit "
                                          r"WideResNet: entry features.1.conv1.weight has shape "
                                          r"\[48, 16, 3, 3\], the network \[32, 16, 3, 3\] "
                                          r"\(only the output "
                                          r"layer may differ\)$"):
        load_pretrained(network, PretrainedWeights.from_file(path))
    # A stored network whose weights file holds another architecture's state.
    g = make_generator(0)
    images, labels = torch.randn(8, 3, 32, 32, generator=g), torch.randint(0, 10, (8,),
                                                                           generator=g)
    recipe = wrn_recipe(1)
    stored = trained_network(recipe, 0, images, labels, tmp_path / "results")
    torch.save(other.state_dict(), stored.path / "weights.pt")
    with pytest.raises(ConfigError) as caught:
        trained_network(recipe, 0, images, labels, tmp_path / "results")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(
        f"{network_dir(tmp_path / 'results', recipe, 0)}/weights.pt does not fit WideResNet "
        "(entry ")
    assert message.endswith("it is a checkpoint of another architecture")
