"""The flat MLP: layout, forward pass, Jacobian, nn.Sequential round trip, initialisation."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.models.activations import ACTIVATIONS
from bench.models.mlp import (
    MLPShape,
    embed_parameters,
    flat_parameters,
    init_parameters,
    shape_of,
)

PER_LAYER = MLPShape((3, 4, 3, 1), ("tanh", "sigmoid"))
ONE_ACTIVATION = MLPShape((2, 5, 4, 1), "tanh")


def theta_and_inputs(shape: MLPShape, seed: int, n: int = 7):
    """N(0, 1) parameters and ``n`` N(0, 1) inputs in float64."""
    g = make_generator(seed)
    theta = torch.randn(shape.n_params, generator=g, dtype=torch.float64)
    return theta, torch.randn(n, shape.widths[0], generator=g, dtype=torch.float64)


@pytest.mark.parametrize("shape", [PER_LAYER, ONE_ACTIVATION, MLPShape((2, 6, 1), "relu"),
                                   MLPShape((3, 1))], ids=str)
def test_jacobian_matches_jacrev(shape):
    theta, x = theta_and_inputs(shape, 4)
    expected = torch.func.jacrev(lambda t: shape.forward_1d(t, x))(theta)
    torch.testing.assert_close(shape.jacobian(theta, x), expected, rtol=1e-12, atol=1e-12)


def test_forward_by_hand_on_a_tiny_network():
    shape = MLPShape((1, 2, 1), "relu")
    # w1 = [[1], [-1]], b1 = [0, 0.5], w2 = [[2, 3]], b2 = [-1]
    theta = torch.tensor([1.0, -1.0, 0.0, 0.5, 2.0, 3.0, -1.0])
    x = torch.tensor([[1.0], [-2.0]])
    # x=1: h = relu([1, -0.5]) = [1, 0] -> 2 - 1 = 1; x=-2: h = relu([-2, 2.5]) = [0, 2.5] -> 6.5
    assert shape.forward(theta, x).tolist() == [[1.0], [6.5]]
    assert shape.forward_1d(theta, x).tolist() == [1.0, 6.5]


@pytest.mark.parametrize("shape", [PER_LAYER, MLPShape((2, 5, 4, 3), "relu")], ids=str)
def test_sequential_round_trip(shape):
    theta, x = theta_and_inputs(shape, 2)
    state = torch.get_rng_state()
    net = shape.module(theta)
    assert torch.equal(torch.get_rng_state(), state)  # nothing drawn from the global RNG
    expected_types = [nn.Linear, ACTIVATIONS[shape.activations[0]].module, nn.Linear,
                      ACTIVATIONS[shape.activations[1]].module, nn.Linear]
    assert [type(m) for m in net] == expected_types
    assert all(p.dtype == torch.float64 for p in net.parameters())
    torch.testing.assert_close(net(x), shape.forward(theta, x), rtol=1e-12, atol=1e-12)
    assert torch.equal(flat_parameters(net), theta)
    assert shape_of(net, shape.activation) == shape
    with torch.no_grad():
        next(net.parameters()).zero_()
    assert torch.equal(flat_parameters(shape.module(theta)), theta)  # the module holds a copy


def test_parameter_count_layer_slices_and_unflatten():
    assert PER_LAYER.n_params == 16 + 15 + 4
    assert PER_LAYER.n_params == sum(p.numel() for p in PER_LAYER.module(
        torch.zeros(PER_LAYER.n_params)).parameters())
    assert PER_LAYER.layer_slices() == [slice(0, 16), slice(16, 31), slice(31, 35)]
    layers = PER_LAYER.unflatten(torch.arange(35.0))
    assert [tuple(w.shape) for w, _ in layers] == [(4, 3), (3, 4), (1, 3)]
    assert layers[1][0][0].tolist() == [16.0, 17.0, 18.0, 19.0]
    assert layers[1][1].tolist() == [28.0, 29.0, 30.0]
    assert MLPShape((50, 100, 100, 1)).n_params == 50 * 100 + 100 + 100 * 100 + 100 + 101


def test_one_activation_is_that_activation_in_every_hidden_layer():
    repeated = MLPShape((2, 5, 4, 1), ["tanh", "tanh"])
    assert repeated.activation == ("tanh", "tanh") and hash(repeated)
    assert ONE_ACTIVATION.activations == repeated.activations == ("tanh", "tanh")
    theta, x = theta_and_inputs(ONE_ACTIVATION, 3)
    assert torch.equal(ONE_ACTIVATION.forward(theta, x), repeated.forward(theta, x))
    assert MLPShape((3, 1), "relu").activations == ()


def test_bad_activations_are_config_errors():
    with pytest.raises(ConfigError, match="2 hidden layers need as many activations"):
        MLPShape((3, 4, 3, 1), ("tanh",))
    with pytest.raises(ConfigError, match="method.activation='swish'"):
        MLPShape((3, 4, 1), "swish")
    with pytest.raises(ConfigError, match="choose one of: relu, tanh, sigmoid"):
        MLPShape((3, 4, 3, 1), ("tanh", "swish"))


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_table_agrees_with_itself_and_autograd(name):
    activation = ACTIVATIONS[name]
    z = torch.linspace(-3, 3, 14, dtype=torch.float64)  # no point at relu's kink
    torch.testing.assert_close(activation.module()(z), activation.function(z))
    autograd = torch.func.vmap(torch.func.grad(activation.function))(z)
    torch.testing.assert_close(activation.derivative(z), autograd)


def test_default_init_matches_nn_linear_bounds_and_moments():
    shape = MLPShape((400, 300, 1))
    state = torch.get_rng_state()
    theta = init_parameters(shape, make_generator(0))
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(theta, init_parameters(shape, make_generator(0)))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        reference = nn.Linear(400, 300).weight.detach()
    (weight, bias), (last_weight, last_bias) = shape.unflatten(theta)
    for values, fan_in in ((weight, 400), (bias, 400), (last_weight, 300), (last_bias, 300)):
        assert float(values.abs().max()) <= fan_in**-0.5
    # U(-b, b) with b = 1/sqrt(400): mean 0, variance b^2 / 3 = 1/1200 (120k draws).
    assert abs(float(weight.mean())) < 3e-4
    assert float(weight.var()) == pytest.approx(1 / 1200, rel=0.01)
    assert float(weight.var()) == pytest.approx(float(reference.var()), rel=0.02)
    assert float(weight.abs().max()) == pytest.approx(float(reference.abs().max()), rel=1e-3)
    assert theta.dtype == torch.float32
    assert init_parameters(shape, make_generator(0), torch.float64).dtype == torch.float64


def test_standard_normal_init_is_one_draw_of_n_params():
    shape = MLPShape((5, 30, 30, 30, 1), ("tanh", "sigmoid", "tanh"))
    theta = init_parameters(shape, make_generator(0), torch.float64, scheme="standard_normal")
    expected = torch.randn(shape.n_params, generator=make_generator(0), dtype=torch.float64)
    assert torch.equal(theta, expected)
    with pytest.raises(ConfigError, match="init.scheme"):
        init_parameters(shape, make_generator(0), scheme="xavier")


@pytest.mark.parametrize("narrow, wide", [
    (MLPShape((1, 3, 2, 1), "tanh"), MLPShape((1, 25, 25, 1), "tanh")),
    (PER_LAYER, MLPShape((3, 6, 5, 1), ("tanh", "sigmoid"))),
], ids=str)
def test_a_narrow_network_embeds_in_a_wide_one_with_the_same_function(narrow, wide):
    theta, x = theta_and_inputs(narrow, 2)
    embedded = embed_parameters(narrow, theta, wide)
    assert embedded.shape == (wide.n_params,)
    assert int((embedded != 0).sum()) == int((theta != 0).sum())
    torch.testing.assert_close(wide.forward(embedded, x), narrow.forward(theta, x),
                               rtol=1e-12, atol=1e-12)


def test_embedding_needs_a_wider_network_of_the_same_kind():
    theta = torch.zeros(ONE_ACTIVATION.n_params, dtype=torch.float64)
    for wide in (MLPShape((2, 4, 4, 1), "tanh"), MLPShape((2, 5, 4, 2), "tanh"),
                 MLPShape((2, 5, 4, 4, 1), "tanh"), MLPShape((2, 5, 4, 1), "relu")):
        with pytest.raises(ConfigError, match="does not embed"):
            embed_parameters(ONE_ACTIVATION, theta, wide)
    with pytest.raises(ConfigError, match="theta has shape"):
        embed_parameters(ONE_ACTIVATION, theta[:3], MLPShape((2, 6, 4, 1), "tanh"))
