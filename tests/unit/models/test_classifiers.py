"""Image classifiers: parameter counts of the papers, generator-driven init, forward shapes."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.models.classifiers import (
    CLASSIFIERS,
    LeNet,
    TwoClassLogits,
    bernoulli_logit_network,
    build_classifier,
    count_parameters,
    has_batch_norm,
)
from bench.models.mlp import MLPShape, flat_parameters, init_parameters

# (name, parameters with a 10-way head, input shape)
PAPER_NETWORKS = [
    ("lenet5", 61_706, (1, 28, 28)),  # Generalized Laplace, Table 1
    ("lenet_redux", 44_426, (1, 28, 28)),  # Laplace Redux LeNet
    ("mlp", 89_610, (1, 28, 28)),  # Laplace Redux MLP 784-100-100-10
    ("resnet18", 11_181_642, (3, 32, 32)),  # torchvision layout, Generalized Laplace Table 2
    ("wrn16_4", 2_748_890, (3, 32, 32)),  # Laplace Redux WRN-16-4
]


@pytest.mark.parametrize(("name", "count", "shape"), PAPER_NETWORKS)
def test_parameter_counts_match_the_papers_and_logits_have_ten_columns(name, count, shape):
    net = build_classifier(name, make_generator(0))
    assert count_parameters(net) == count
    net.eval()
    with torch.no_grad():
        assert net(torch.zeros(1, *shape)).shape == (1, 10)


@pytest.mark.parametrize("name", list(CLASSIFIERS))
@pytest.mark.second_tier
def test_same_generator_seed_gives_identical_weights_and_leaves_global_rng_alone(name):
    global_state = torch.get_rng_state()
    classes = 2 if name == "binary_cnn" else 10   # one Bernoulli logit: two classes only
    first = build_classifier(name, make_generator(5), num_classes=classes).state_dict()
    second = build_classifier(name, make_generator(5), num_classes=classes).state_dict()
    other = build_classifier(name, make_generator(6), num_classes=classes).state_dict()
    assert torch.equal(torch.get_rng_state(), global_state)
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert any(not torch.equal(first[k], other[k]) for k in first if first[k].is_floating_point())


def test_lenet_head_widths_and_last_layer_size():
    # padded first conv keeps 28 -> 28 -> 14 -> 10 -> 5: 400 features; unpadded 256
    assert LeNet(padding=2).head[0].in_features == 400
    assert LeNet(padding=0).head[0].in_features == 256
    redux = build_classifier("lenet_redux", make_generator(0))
    assert count_parameters(redux.head[-1]) == 850


def test_default_init_is_uniform_with_bound_one_over_sqrt_fan_in():
    net = build_classifier("lenet5", make_generator(1))
    fc = net.head[0].requires_grad_(False)  # 400 -> 120: weight 48,000 entries uniform on +-1/20
    bound = 1 / math.sqrt(400)
    assert fc.weight.abs().max() <= bound
    # a uniform on +-b has variance b^2 / 3; 48k draws pin the sample variance to ~1 %
    assert float(fc.weight.var()) == pytest.approx(bound**2 / 3, rel=0.03)
    conv = net.features[0]  # fan_in 25
    assert conv.bias.abs().max() <= 1 / 5


@pytest.mark.parametrize(("name", "conv_path"), [("resnet18", "layer4.1.conv2"),
                                                 ("wrn16_4", "features.6.conv2")])
def test_convolutions_are_he_normal_fan_out_and_batch_norms_start_at_identity(name, conv_path):
    net = build_classifier(name, make_generator(2))
    conv = net.get_submodule(conv_path)
    fan_out = conv.out_channels * conv.kernel_size[0] * conv.kernel_size[1]
    weight, sd = conv.weight.detach(), math.sqrt(2 / fan_out)
    # the sample mean of n draws has sd sd / sqrt(n); n = 589,824 (WRN) or 2,359,296
    assert float(weight.mean()) == pytest.approx(0.0, abs=5 * sd / math.sqrt(weight.numel()))
    assert float(weight.std()) == pytest.approx(sd, rel=0.01)
    assert has_batch_norm(net)
    for module in net.modules():
        if isinstance(module, nn.BatchNorm2d):
            assert torch.equal(module.weight, torch.ones_like(module.weight))
            assert torch.equal(module.bias, torch.zeros_like(module.bias))
            assert torch.equal(module.running_var, torch.ones_like(module.running_var))
            assert torch.equal(module.running_mean, torch.zeros_like(module.running_mean))
            assert int(module.num_batches_tracked) == 0
    if name == "wrn16_4":
        assert torch.equal(net.fc.bias, torch.zeros(10))


def test_mlp_is_a_module_view_of_the_flat_mlp():
    net = build_classifier("mlp", make_generator(3))
    shape = MLPShape((784, 100, 100, 10), "relu")
    theta = init_parameters(shape, make_generator(3))
    assert torch.equal(flat_parameters(net), theta)
    x = torch.rand(4, 1, 28, 28, generator=make_generator(4))
    torch.testing.assert_close(net(x), shape.forward(theta, x.flatten(1)))
    assert not has_batch_norm(net)


@pytest.mark.second_tier
def test_wrn_dropout_option_and_other_input_depths():
    net = build_classifier("wrn16_4", make_generator(0), dropout=0.0)
    assert all(m.p == 0.0 for m in net.modules() if isinstance(m, nn.Dropout))
    assert all(m.p == 0.3 for m in build_classifier("wrn16_4", make_generator(0)).modules()
               if isinstance(m, nn.Dropout))
    gray = build_classifier("resnet18", make_generator(0), in_channels=1, num_classes=3)
    assert gray(torch.zeros(2, 1, 32, 32)).shape == (2, 3)


def test_bad_names_and_options_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="model.name='lenet7'.*lenet5"):
        build_classifier("lenet7", make_generator(0))
    with pytest.raises(ConfigError, match="model.dropout=0.1 is not an option of lenet5; its"):
        build_classifier("lenet5", make_generator(0), dropout=0.1)


@pytest.mark.second_tier
def test_scaled_resnet18_keeps_torchvision_layout():
    from torchvision.models import resnet18

    from bench.models.classifiers import _scaled_resnet18

    full = [(k, tuple(v.shape)) for k, v in resnet18(num_classes=10).state_dict().items()]
    same_width = _scaled_resnet18(10, 3, 64).state_dict()
    assert [(k, tuple(v.shape)) for k, v in same_width.items()] == full
    narrow = build_classifier("resnet18", make_generator(0), width=8)
    # Widths 8, 16, 32, 64: convs after the stem (11,166,912 - 9,408 weights at width 64) get
    # (1/8)^2 of them, the stem 8 * 3 * 49, batch norm 9,600 / 8, the head 64 * 10 + 10:
    # 174,336 + 1,176 + 1,200 + 650.
    assert dict(narrow.named_parameters())["layer4.1.conv2.weight"].shape == (64, 64, 3, 3)
    assert narrow(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    assert count_parameters(narrow) == 177_362


def wrn16_parameter_count(widen: int, classes: int = 10, channels: int = 3) -> int:
    """WRN-16-k by hand: stem conv, two pre-activation blocks per group (BN weight and bias,
    two 3x3 convs, a 1x1 shortcut where the width or stride changes), final BN, head."""
    widths = (16, 16 * widen, 32 * widen, 64 * widen)
    total = channels * 16 * 9
    for group, stride in enumerate((1, 2, 2)):
        for block in range(2):
            w_in, w_out = (widths[group] if block == 0 else widths[group + 1]), widths[group + 1]
            total += 2 * w_in + w_in * w_out * 9 + 2 * w_out + w_out * w_out * 9
            if block == 0 and (w_in != w_out or stride != 1):
                total += w_in * w_out
    return total + 2 * widths[-1] + widths[-1] * classes + classes


def test_wrn_widen_option_gives_the_smaller_wide_resnet():
    assert wrn16_parameter_count(4) == 2_748_890
    net = build_classifier("wrn16_4", make_generator(0), widen=1)
    assert sum(p.numel() for p in net.parameters()) == wrn16_parameter_count(1)
    assert net.fc.in_features == 64 and net(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ConfigError, match=r"^model.widen=0 is not valid"):
        build_classifier("wrn16_4", make_generator(0), widen=0)


def test_binary_cnn_has_the_thesis_4587_parameters_and_one_bernoulli_logit():
    net = build_classifier("binary_cnn", make_generator(0), num_classes=2)
    assert isinstance(net, TwoClassLogits) and count_parameters(net) == 4587
    inner = bernoulli_logit_network(net)
    assert sum(isinstance(m, nn.Conv2d) for m in inner.modules()) == 2
    assert sum(isinstance(m, nn.Linear) for m in inner.modules()) == 3
    x = torch.rand(5, 1, 28, 28, generator=make_generator(1))
    y = torch.tensor([0, 1, 1, 0, 1])
    with torch.no_grad():
        f = inner(x).squeeze(1)
        logits = net(x)
    assert torch.equal(logits[:, 0], torch.zeros(5)) and torch.equal(logits[:, 1], f)
    # Cross-entropy of the logits [0, f] is the Bernoulli NLL of the logit f.
    cross_entropy = nn.functional.cross_entropy(logits.double(), y)
    bernoulli = nn.functional.binary_cross_entropy_with_logits(f.double(), y.double())
    assert float(cross_entropy) == pytest.approx(float(bernoulli), abs=1e-12)
    assert torch.allclose(torch.softmax(logits, 1)[:, 1], torch.sigmoid(f))
    assert bernoulli_logit_network(inner) is inner
    with pytest.raises(ConfigError, match="num_classes=10 is not valid for binary_cnn"):
        build_classifier("binary_cnn", make_generator(0))
