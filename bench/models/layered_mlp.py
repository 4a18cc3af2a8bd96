"""Single-output fully connected networks with one activation per hidden layer.

The subnetwork paper's networks use a different activation in each hidden layer (tanh,
sigmoid, tanh), which :class:`bench.models.mlp.MLPShape` (one activation for all layers) does not
express. This module is its per-layer generalisation with the same flat-parameter layout: per
layer the weight ``[out, in]`` row-major, then the bias, layers from input to output (the order
``nn.Sequential`` of ``nn.Linear`` uses), so "the last k parameters" and "the last layer" mean
what Appendix B of the paper says.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from bench.harness.errors import ConfigError, require_choice

ACTIVATIONS = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu}
_MODULES = {"tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "relu": nn.ReLU}


@dataclass(frozen=True)
class LayeredNetwork:
    """Widths ``(d_in, h_1, ..., h_L, 1)`` and one activation name per hidden layer."""

    widths: tuple[int, ...]
    activations: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.activations) != len(self.widths) - 2:
            raise ConfigError(f"{len(self.widths) - 2} hidden layers need as many activations, "
                              f"got {self.activations}")
        if self.widths[-1] != 1:
            raise ConfigError(f"the network has a single output, got widths {self.widths}")
        for name in self.activations:
            require_choice("network.activation", name, ACTIVATIONS)

    @property
    def layers(self) -> list[tuple[int, int]]:
        """(fan_in, fan_out) per linear layer."""
        return list(zip(self.widths[:-1], self.widths[1:], strict=True))

    @property
    def n_params(self) -> int:
        """Number of parameters p."""
        return sum(fan_out * (fan_in + 1) for fan_in, fan_out in self.layers)

    def layer_slices(self) -> list[slice]:
        """The slice of the flat vector holding each layer's weight and bias."""
        slices, start = [], 0
        for fan_in, fan_out in self.layers:
            slices.append(slice(start, start + fan_out * (fan_in + 1)))
            start += fan_out * (fan_in + 1)
        return slices

    def unflatten(self, theta: Tensor) -> list[tuple[Tensor, Tensor]]:
        """(weight, bias) per layer as views into ``theta``."""
        out = []
        for (fan_in, fan_out), part in zip(self.layers, self.layer_slices(), strict=True):
            block = theta[part]
            out.append((block[:fan_in * fan_out].reshape(fan_out, fan_in),
                        block[fan_in * fan_out:]))
        return out

    def forward(self, theta: Tensor, x: Tensor) -> Tensor:
        """Outputs ``f_theta(x)`` ``[n]`` at inputs ``x`` ``[n, d_in]`` (differentiable)."""
        layers = self.unflatten(theta)
        h = x
        for (weight, bias), name in zip(layers[:-1], self.activations, strict=True):
            h = ACTIVATIONS[name](h @ weight.T + bias)
        weight, bias = layers[-1]
        return (h @ weight.T + bias)[:, 0]

    def jacobian(self, theta: Tensor, x: Tensor) -> Tensor:
        """Per-input gradients ``g(x) = d f_theta(x) / d theta``, ``[n, p]`` (explicit backprop)."""
        layers = self.unflatten(theta)
        inputs, pre = [], []
        h = x
        for i, (weight, bias) in enumerate(layers):
            inputs.append(h)
            z = h @ weight.T + bias
            pre.append(z)
            if i < len(layers) - 1:
                h = ACTIVATIONS[self.activations[i]](z)
        grads = [torch.ones_like(pre[-1])]
        for i in range(len(layers) - 1, 0, -1):
            upstream = grads[0] @ layers[i][0]
            grads.insert(0, upstream * _derivative(self.activations[i - 1], pre[i - 1]))
        blocks = []
        for a, g in zip(inputs, grads, strict=True):
            blocks.append((g.unsqueeze(2) * a.unsqueeze(1)).flatten(1))
            blocks.append(g)
        return torch.cat(blocks, dim=1)

    def module(self, theta: Tensor) -> nn.Sequential:
        """An ``nn.Sequential`` holding ``theta`` (for libraries such as laplace-torch)."""
        modules: list[nn.Module] = []
        for i, (fan_in, fan_out) in enumerate(self.layers):
            modules.append(nn.Linear(fan_in, fan_out, dtype=theta.dtype))
            if i < len(self.activations):
                modules.append(_MODULES[self.activations[i]]())
        net = nn.Sequential(*modules)
        nn.utils.vector_to_parameters(theta.detach().clone(), net.parameters())
        return net


def standard_normal_parameters(network: LayeredNetwork, generator: torch.Generator,
                               dtype: torch.dtype = torch.float64) -> Tensor:
    """All weights and biases i.i.d. N(0, 1) (the paper's data-generating networks)."""
    return torch.randn(network.n_params, generator=generator, dtype=dtype)


def _derivative(activation: str, z: Tensor) -> Tensor:
    """Elementwise derivative of the activation at pre-activations ``z``."""
    if activation == "tanh":
        return 1 - torch.tanh(z) ** 2
    if activation == "sigmoid":
        s = torch.sigmoid(z)
        return s * (1 - s)
    return (z > 0).to(z.dtype)
