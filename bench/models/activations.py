"""Hidden-layer activations by config name: the function, its ``nn.Module`` class and its
derivative, so flat-parameter networks, ``nn.Sequential`` builders and Lightning-UQ-Box
modules all read one table."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn


class Activation(NamedTuple):
    """An elementwise activation in its three forms."""

    function: Callable[[Tensor], Tensor]
    module: type[nn.Module]
    derivative: Callable[[Tensor], Tensor]


def _relu_derivative(z: Tensor) -> Tensor:
    return (z > 0).to(z.dtype)


def _tanh_derivative(z: Tensor) -> Tensor:
    return 1 - torch.tanh(z) ** 2


def _sigmoid_derivative(z: Tensor) -> Tensor:
    s = torch.sigmoid(z)
    return s * (1 - s)


ACTIVATIONS = {
    "relu": Activation(torch.relu, nn.ReLU, _relu_derivative),
    "tanh": Activation(torch.tanh, nn.Tanh, _tanh_derivative),
    "sigmoid": Activation(torch.sigmoid, nn.Sigmoid, _sigmoid_derivative),
}

