"""The WILDS networks and their checkpoints: torchvision's DenseNet-121 / ResNet-18 as body +
last layer, both checkpoint forms, and mismatches stopped with one line naming the file."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torchvision import models as vision_models

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.models.wilds_networks import build_network, load_checkpoint
from tests.wilds_fixtures import wilds_checkpoint

TINY_DENSENET = {"growth_rate": 4, "block_config": [1, 1, 1, 1], "num_init_features": 8}


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.second_tier
def test_densenet121_and_multispectral_resnet18_are_torchvisions():
    densenet = build_network("densenet121", 62)
    reference = vision_models.densenet121(num_classes=62)
    # DenseNet-121's 7,978,856 ImageNet parameters less its 1024 x 1000 + 1000 last layer,
    # plus 1024 x 62 + 62.
    assert count(densenet) == count(reference) == 7_978_856 - 1_025_000 + 63_550
    assert {f"body.{k}" for k in reference.state_dict() if not k.startswith("classifier.")} \
        == {k for k in densenet.state_dict() if k.startswith("body.")}
    resnet = build_network("resnet18_ms", 1, {"in_channels": 8})
    # torchvision's ResNet-18 with one output, its first convolution taking 8 bands, not 3.
    assert count(resnet) == count(vision_models.resnet18(num_classes=1)) + 5 * 64 * 7 * 7
    assert tuple(resnet.body.conv1.weight.shape) == (64, 8, 7, 7)
    x = torch.randn(2, 8, 64, 64)
    assert resnet.eval()(x).shape == (2, 1)


@pytest.mark.parametrize("form", ["model", "featurizer"])
def test_checkpoint_forms_load_the_same_network(tmp_path, form):
    saved = wilds_checkpoint("densenet121", 2, TINY_DENSENET, form, seed=3)
    path = tmp_path / f"{form}.pth"
    torch.save(saved, path)
    network = load_checkpoint(path, "densenet121", 2, TINY_DENSENET)
    source = build_network("densenet121", 2, TINY_DENSENET, form, make_generator(3)).eval()
    x = torch.randn(3, 3, 32, 32, generator=make_generator(0))
    with torch.no_grad():
        assert torch.equal(network(x), source(x))
    key = "model.classifier.weight" if form == "model" else "classifier.weight"
    assert torch.equal(network.head.weight, saved["algorithm"][key])


def test_text_stand_in_featurizer_form_has_no_pre_classifier(tmp_path):
    options = {"vocab_size": 50, "dim": 4}
    torch.save(wilds_checkpoint("bag_of_words", 5, options, "featurizer", seed=1),
               tmp_path / "coral.pth")
    network = load_checkpoint(tmp_path / "coral.pth", "bag_of_words", 5, options)
    assert network.body.pre_classifier is None
    tokens = torch.stack([torch.randint(0, 50, (2, 7)), torch.ones(2, 7, dtype=torch.long)], -1)
    assert network(tokens).shape == (2, 5)


def test_mismatched_checkpoints_are_one_line_naming_the_file(tmp_path):
    torch.save(wilds_checkpoint("tiny_cnn", 3, {"width": 8}, "model", seed=0),
               tmp_path / "three.pth")
    with pytest.raises(ConfigError, match=r"^checkpoint .*three.pth does not match dataset."
                       r"network.architecture='tiny_cnn' with 2 outputs: head.weight has shape "
                       r"\(3, 8\), the network \(2, 8\)$"):
        load_checkpoint(tmp_path / "three.pth", "tiny_cnn", 2, {"width": 8})
    torch.save(wilds_checkpoint("tiny_cnn", 2, {"width": 8}, "model", seed=0),
               tmp_path / "cnn.pth")
    with pytest.raises(ConfigError, match=r"cnn.pth does not match dataset.network.architecture="
                       r"'densenet121' with 2 outputs: missing key body.features"):
        load_checkpoint(tmp_path / "cnn.pth", "densenet121", 2, TINY_DENSENET)
    torch.save({"state_dict": {}}, tmp_path / "plain.pth")
    with pytest.raises(ConfigError, match="plain.pth has no 'algorithm' state"):
        load_checkpoint(tmp_path / "plain.pth", "tiny_cnn", 2)
    (tmp_path / "text.pth").write_text("not a checkpoint")
    with pytest.raises(ConfigError, match="text.pth cannot be read by torch.load"):
        load_checkpoint(tmp_path / "text.pth", "tiny_cnn", 2)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is not None,
                    reason="transformers is installed here")
def test_distilbert_without_transformers_names_the_key_and_the_stand_in():
    with pytest.raises(ConfigError, match="dataset.network.architecture='distilbert' needs the "
                       "transformers package.*bag_of_words"):
        build_network("distilbert", 2)
