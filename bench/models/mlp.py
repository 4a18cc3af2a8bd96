"""A fully connected network evaluated from one flat parameter vector.

Parameters are laid out as ``nn.Sequential`` of ``nn.Linear`` lays them out (per layer: the
weight ``[out, in]`` row-major, then the bias), so a flat vector converts to and from a
torch module without reordering. The forward pass is plain matmuls, so it runs under
``torch.func.vmap`` across many parameter vectors (the batched refits of SSLA).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from bench.harness.errors import require_choice

ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}


@dataclass(frozen=True)
class MLPShape:
    """Layer widths ``(d_in, h_1, ..., d_out)`` and the hidden activation's name."""

    widths: tuple[int, ...]
    activation: str = "relu"

    def __post_init__(self) -> None:
        require_choice("method.activation", self.activation, ACTIVATIONS)

    @property
    def layers(self) -> list[tuple[int, int]]:
        """(fan_in, fan_out) per linear layer."""
        return list(zip(self.widths[:-1], self.widths[1:], strict=True))

    @property
    def n_params(self) -> int:
        """Number of parameters q."""
        return sum(fan_out * (fan_in + 1) for fan_in, fan_out in self.layers)

    def unflatten(self, theta: Tensor) -> list[tuple[Tensor, Tensor]]:
        """(weight, bias) per layer as views into ``theta``."""
        out, start = [], 0
        for fan_in, fan_out in self.layers:
            weight = theta[start:start + fan_in * fan_out].reshape(fan_out, fan_in)
            start += fan_in * fan_out
            out.append((weight, theta[start:start + fan_out]))
            start += fan_out
        return out

    def forward(self, theta: Tensor, x: Tensor) -> Tensor:
        """Network outputs ``[n, d_out]`` at inputs ``x`` ``[n, d_in]``."""
        act = ACTIVATIONS[self.activation]
        layers = self.unflatten(theta)
        h = x
        for weight, bias in layers[:-1]:
            h = act(h @ weight.T + bias)
        weight, bias = layers[-1]
        return h @ weight.T + bias

    def forward_1d(self, theta: Tensor, x: Tensor) -> Tensor:
        """Single-output network's predictions ``[n]``."""
        return self.forward(theta, x)[:, 0]

    def layer_inputs_and_output_grads(self, theta: Tensor, x: Tensor):
        """Per layer, the inputs ``a`` ``[n, fan_in]`` and the output's gradient ``g`` w.r.t.
        the layer's pre-activations ``[n, fan_out]`` (single-output networks; K-FAC factors)."""
        layers = self.unflatten(theta)
        inputs, pre = [], []
        h = x
        for i, (weight, bias) in enumerate(layers):
            inputs.append(h)
            z = h @ weight.T + bias
            pre.append(z)
            if i < len(layers) - 1:
                h = ACTIVATIONS[self.activation](z)
        grads = [torch.ones_like(pre[-1])]
        for i in range(len(layers) - 1, 0, -1):
            grads.insert(0, (grads[0] @ layers[i][0]) * _derivative(self.activation, pre[i - 1]))
        return inputs, grads

    def jacobian(self, theta: Tensor, x: Tensor) -> Tensor:
        """Per-example gradients of the single output, ``[n, q]``."""
        inputs, grads = self.layer_inputs_and_output_grads(theta, x)
        blocks = []
        for a, g in zip(inputs, grads, strict=True):
            blocks.append((g.unsqueeze(2) * a.unsqueeze(1)).flatten(1))
            blocks.append(g)
        return torch.cat(blocks, dim=1)


def _derivative(activation: str, z: Tensor) -> Tensor:
    """Elementwise derivative of the activation at pre-activations ``z``."""
    if activation == "relu":
        return (z > 0).to(z.dtype)
    if activation == "tanh":
        return 1 - torch.tanh(z) ** 2
    s = torch.sigmoid(z)
    return s * (1 - s)


def shape_of(module: nn.Module, activation: str) -> MLPShape:
    """The MLPShape of a module whose parameters are a chain of ``nn.Linear`` layers."""
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    widths = (linears[0].in_features, *[m.out_features for m in linears])
    return MLPShape(widths, activation)


def flat_parameters(module: nn.Module) -> Tensor:
    """All parameters of ``module`` as one detached vector (module order)."""
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def init_parameters(shape: MLPShape, generator: torch.Generator, dtype=torch.float32) -> Tensor:
    """PyTorch's default ``nn.Linear`` initialisation, drawn from ``generator``."""
    chunks = []
    for fan_in, fan_out in shape.layers:
        bound = 1 / fan_in**0.5
        chunks.append((torch.rand(fan_out * fan_in, generator=generator, dtype=dtype) * 2 - 1)
                      * bound)
        chunks.append((torch.rand(fan_out, generator=generator, dtype=dtype) * 2 - 1) * bound)
    return torch.cat(chunks)
