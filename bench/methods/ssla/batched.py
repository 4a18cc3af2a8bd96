"""One network evaluated at many parameter vectors at once (the refits' and objectives' inner
loop), in chunks that keep the activations small."""

from __future__ import annotations

import torch
from torch import Tensor

from bench.models.mlp import MLPShape

MAX_ACTIVATIONS = 2**23


def batched_outputs(shape: MLPShape, thetas: Tensor, x: Tensor) -> Tensor:
    """``f(x_rb; theta_r)`` for thetas ``[R, q]`` and inputs ``[R, b, d]`` or ``[b, d]``.

    Inputs shared by every theta (``[b, d]``) are evaluated in chunks of thetas so that one
    hidden layer's activations stay below :data:`MAX_ACTIVATIONS` numbers (R refits of a
    10k-point training set would otherwise need tens of GB).
    """
    if x.dim() == 2:
        chunk = max(1, MAX_ACTIVATIONS // (len(x) * max(shape.widths)))
        forward = torch.func.vmap(shape.forward_1d, in_dims=(0, None))
        if len(thetas) <= chunk:
            return forward(thetas, x)
        return torch.cat([forward(part, x) for part in thetas.split(chunk)])
    return torch.func.vmap(shape.forward_1d)(thetas, x)
