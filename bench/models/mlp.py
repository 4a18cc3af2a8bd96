"""A fully connected network evaluated from one flat parameter vector.

Parameters are laid out as ``nn.Sequential`` of ``nn.Linear`` lays them out (per layer: the
weight ``[out, in]`` row-major, then the bias, layers from input to output), so a flat vector
converts to and from a torch module without reordering, and "the last k parameters" and "the
last layer" mean what the subnetwork paper's Appendix B says. The forward pass is plain
matmuls, so it runs under ``torch.func.vmap`` across many parameter vectors (the batched
refits of SSLA, the HMC samples).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from bench.harness.errors import ConfigError, require_choice
from bench.models.activations import ACTIVATIONS

INIT_SCHEMES = ("linear_default", "standard_normal")


@dataclass(frozen=True)
class MLPShape:
    """Layer widths ``(d_in, h_1, ..., d_out)`` and the hidden activation: one name for every
    hidden layer, or a sequence of one name per hidden layer."""

    widths: tuple[int, ...]
    activation: str | tuple[str, ...] = "relu"

    def __post_init__(self) -> None:
        if not isinstance(self.activation, str):
            object.__setattr__(self, "activation", tuple(self.activation))
            if len(self.activation) != len(self.widths) - 2:
                raise ConfigError(f"{len(self.widths) - 2} hidden layers need as many "
                                  f"activations, got {self.activation}")
        for name in self.activations:
            require_choice("method.activation", name, ACTIVATIONS)

    @property
    def activations(self) -> tuple[str, ...]:
        """The activation name of each hidden layer."""
        if isinstance(self.activation, str):
            return (self.activation,) * (len(self.widths) - 2)
        return self.activation

    @property
    def layers(self) -> list[tuple[int, int]]:
        """(fan_in, fan_out) per linear layer."""
        return list(zip(self.widths[:-1], self.widths[1:], strict=True))

    @property
    def n_params(self) -> int:
        """Number of parameters q."""
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
        """Network outputs ``[n, d_out]`` at inputs ``x`` ``[n, d_in]``."""
        layers = self.unflatten(theta)
        h = x
        for (weight, bias), name in zip(layers[:-1], self.activations, strict=True):
            h = ACTIVATIONS[name].function(h @ weight.T + bias)
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
                h = ACTIVATIONS[self.activations[i]].function(z)
        grads = [torch.ones_like(pre[-1])]
        for i in range(len(layers) - 1, 0, -1):
            derivative = ACTIVATIONS[self.activations[i - 1]].derivative
            grads.insert(0, (grads[0] @ layers[i][0]) * derivative(pre[i - 1]))
        return inputs, grads

    def jacobian(self, theta: Tensor, x: Tensor) -> Tensor:
        """Per-example gradients of the single output, ``[n, q]`` (explicit backprop)."""
        inputs, grads = self.layer_inputs_and_output_grads(theta, x)
        blocks = []
        for a, g in zip(inputs, grads, strict=True):
            blocks.append((g.unsqueeze(2) * a.unsqueeze(1)).flatten(1))
            blocks.append(g)
        return torch.cat(blocks, dim=1)

    def module(self, theta: Tensor) -> nn.Sequential:
        """An ``nn.Sequential`` holding a copy of ``theta`` (for libraries such as
        laplace-torch); building it draws nothing from the global RNG."""
        modules: list[nn.Module] = []
        for i, (fan_in, fan_out) in enumerate(self.layers):
            modules.append(nn.utils.skip_init(nn.Linear, fan_in, fan_out, dtype=theta.dtype,
                                              device=theta.device))
            if i < len(self.layers) - 1:
                modules.append(ACTIVATIONS[self.activations[i]].module())
        net = nn.Sequential(*modules)
        nn.utils.vector_to_parameters(theta.detach().clone(), net.parameters())
        return net


def shape_of(module: nn.Module, activation: str | tuple[str, ...]) -> MLPShape:
    """The MLPShape of a module whose parameters are a chain of ``nn.Linear`` layers."""
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    widths = (linears[0].in_features, *[m.out_features for m in linears])
    return MLPShape(widths, activation)


def flat_parameters(module: nn.Module) -> Tensor:
    """All parameters of ``module`` as one detached vector (module order)."""
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def init_parameters(shape: MLPShape, generator: torch.Generator, dtype=torch.float32, *,
                    scheme: str = "linear_default", device=None) -> Tensor:
    """Initial flat parameters, every draw from ``generator``.

    ``linear_default``: PyTorch's default ``nn.Linear`` initialisation, weight then bias of
    each layer uniform on ``+-1/sqrt(fan_in)``; ``standard_normal``: all weights and biases
    i.i.d. N(0, 1) (the subnetwork paper's data-generating networks).
    """
    require_choice("init.scheme", scheme, INIT_SCHEMES)
    if scheme == "standard_normal":
        return torch.randn(shape.n_params, generator=generator, dtype=dtype, device=device)
    chunks = []
    for fan_in, fan_out in shape.layers:
        bound = 1 / fan_in**0.5
        for size in (fan_out * fan_in, fan_out):
            uniform = torch.rand(size, generator=generator, dtype=dtype, device=device)
            chunks.append((uniform * 2 - 1) * bound)
    return torch.cat(chunks)


def embed_parameters(narrow: MLPShape, theta: Tensor, wide: MLPShape) -> Tensor:
    """``theta`` of ``narrow`` as parameters of ``wide`` computing the same function: each
    narrow hidden unit keeps its weights and bias, the extra units get zero incoming and
    outgoing weights and zero bias (so their activation, whatever its value at 0, is never
    read). The networks need the same inputs, outputs, depth and activations, and every
    hidden layer of ``wide`` at least as wide as ``narrow``'s."""
    same_ends = (narrow.widths[0], narrow.widths[-1]) == (wide.widths[0], wide.widths[-1])
    if not same_ends or len(narrow.widths) != len(wide.widths) \
            or narrow.activations != wide.activations \
            or any(n > w for n, w in zip(narrow.widths, wide.widths, strict=True)):
        raise ConfigError(f"network {narrow.widths} ({narrow.activation}) does not embed in "
                          f"{wide.widths} ({wide.activation})")
    if theta.shape != (narrow.n_params,):
        raise ConfigError(f"theta has shape {tuple(theta.shape)}; the network "
                          f"{narrow.widths} has {narrow.n_params} parameters")
    out = theta.new_zeros(wide.n_params)
    for (weight, bias), (wide_weight, wide_bias) in zip(narrow.unflatten(theta),
                                                        wide.unflatten(out), strict=True):
        wide_weight[:weight.shape[0], :weight.shape[1]] = weight
        wide_bias[:bias.shape[0]] = bias
    return out
