"""Weights too small to be normal floats set to zero while a classifier trains.

Adam with weight decay drives the weights of units that stopped learning towards zero, through
the subnormal floats (below 1.2e-38 in float32): 5,655 of the 44,426 weights of Laplace Redux's
MAP LeNet after its 100 epochs (the authors' code recipe, ``adam_b512``), 39,511 with Adam at
lr 0.1. x86 CPUs compute with subnormal operands in microcode: a forward and backward pass on
those two stored networks took 2x and 8x as long as on the same networks with those weights set
to zero, and one training run's epochs slowed from 5 s to 20-27 s as its weights decayed
(``python -m bench.benchmarks.subnormal_training`` measures it on a LeNet with as many
subnormal weights). The loss of a minibatch was the same to the last bit either way: a weight
below 1.2e-38 adds less than the rounding of any sum it enters beside normal numbers.

Zeroing is explicit and thread-independent, unlike the CPU's flush-to-zero mode (a per-thread
register that torch's intra-op threads copy or not depending on when they started), which
also changes the arithmetic of everything else a job computes.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor


@torch.no_grad()
def zero_subnormal_weights(parameters: Iterable[Tensor]) -> None:
    """Set every subnormal entry of the floating-point CPU ``parameters`` to zero, in place.

    Parameters on another device are left as they are: the slowdown measured here is the x86
    CPU's, and what zeroing would cost or save on a GPU (a few kernels per parameter tensor
    per step) was not measured."""
    for parameter in parameters:
        if parameter.is_floating_point() and parameter.device.type == "cpu":
            tiny = torch.finfo(parameter.dtype).tiny
            parameter.masked_fill_(parameter.abs() < tiny, 0.0)
