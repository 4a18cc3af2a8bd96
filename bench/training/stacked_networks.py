"""Several networks of one architecture held as one: their parameters stacked along a leading
member axis (``torch.func.stack_module_state``) and evaluated together by
``torch.func.functional_call``, so one backward pass and one optimizer step train them all.

Member ``k`` sees its own images: the input is ``[K, B, ...]`` and the logits are
``[K, B, classes]``. Two ways to run the members at once, the same mathematics:

* **grouped** (conv nets built from ``Conv2d``, ``Linear``, pooling, activations and
  ``Flatten`` in ``nn.Sequential`` blocks: ``lenet5``, ``lenet_redux``, ``mlp``): a twin of the
  network whose convolutions are one grouped convolution over the members' channels (members
  side by side in the channel axis, channels-last) and whose linear layers are one batched
  matrix product. On CPU this is 1.3x-2x faster than ``vmap``, whose convolution rule
  shuffles the layout between every layer (measured on LeNet, 5 members, batch 128).
* **vmapped**: ``torch.func.vmap`` of ``functional_call`` over the members, for any other
  network without batch norm or dropout.

Networks with batch norm (running statistics) or dropout (random masks drawn from the global
RNG per network) are not stackable: :func:`stackable` says so, and callers train them one by
one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from bench.models.classifiers import LeNet

RANDOM_OR_STATEFUL = (nn.modules.batchnorm._BatchNorm, nn.modules.dropout._DropoutNd)
ELEMENTWISE = (nn.ReLU, nn.Tanh, nn.Sigmoid, nn.MaxPool2d, nn.AvgPool2d, nn.Identity)
GROUPED_CONTAINERS = (nn.Sequential, LeNet)


def stackable(module: nn.Module) -> bool:
    """Whether copies of ``module`` can train as one stacked network: no batch norm, no
    dropout layers (even with p = 0, whose RNG use differs) and no buffers."""
    return (not any(isinstance(m, RANDOM_OR_STATEFUL) for m in module.modules())
            and not list(module.buffers()))


class GroupedConv2d(nn.Module):
    """``K`` members' ``Conv2d`` as one convolution with ``K`` times the groups, on inputs
    ``[B, K * C_in, H, W]``; ``weight`` is the stacked ``[K, C_out, C_in / groups, h, w]``."""

    def __init__(self, conv: nn.Conv2d) -> None:
        super().__init__()
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("GroupedConv2d supports numeric zero padding only")
        self.stride, self.padding, self.dilation = conv.stride, conv.padding, conv.dilation
        self.groups = conv.groups
        self.weight = conv.weight
        self.bias = conv.bias

    def forward(self, x: Tensor) -> Tensor:
        """The members' feature maps ``[B, K * C_out, H', W']``."""
        members = self.weight.shape[0]
        bias = None if self.bias is None else self.bias.reshape(-1)
        return F.conv2d(x, self.weight.flatten(0, 1), bias, self.stride, self.padding,
                        self.dilation, self.groups * members)


class MemberLinear(nn.Module):
    """``K`` members' ``Linear`` on ``[K, B, in]`` as one batched matrix product;
    ``weight`` is the stacked ``[K, out, in]``."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias

    def forward(self, x: Tensor) -> Tensor:
        """``[K, B, out]``."""
        if self.bias is None:
            return torch.bmm(x, self.weight.transpose(1, 2))
        return torch.baddbmm(self.bias.unsqueeze(1), x, self.weight.transpose(1, 2))


class MemberFlatten(nn.Module):
    """``[B, K * C, H, W]`` (members side by side in the channel axis) to ``[K, B, C*H*W]``."""

    def __init__(self, members: int) -> None:
        super().__init__()
        self.members = members

    def forward(self, x: Tensor) -> Tensor:
        """The members' flat features."""
        return x.reshape(x.shape[0], self.members, -1).transpose(0, 1)


def grouped_twin(module: nn.Module, members: int) -> nn.Module | None:
    """A copy of ``module`` (on the meta device) whose layers take ``members`` networks at
    once (:class:`GroupedConv2d`, :class:`MemberLinear`, :class:`MemberFlatten`), or None when
    ``module`` is not built only of those layers, pooling and activations inside
    :data:`GROUPED_CONTAINERS`."""
    if type(module) not in GROUPED_CONTAINERS:
        return None
    twin = copy.deepcopy(module).to("meta")
    for name, child in list(twin.named_modules()):
        if name == "" or type(child) in GROUPED_CONTAINERS:
            continue
        if isinstance(child, nn.Conv2d):
            replacement = GroupedConv2d(child)
        elif isinstance(child, nn.Linear):
            replacement = MemberLinear(child)
        elif isinstance(child, nn.Flatten) and child.start_dim == 1 and child.end_dim == -1:
            replacement = MemberFlatten(members)
        elif isinstance(child, ELEMENTWISE):
            continue
        else:
            return None
        parent, _, attribute = name.rpartition(".")
        setattr(twin.get_submodule(parent), attribute, replacement)
    flat = [m for m in twin.modules() if isinstance(m, MemberFlatten | MemberLinear)]
    if not flat or not isinstance(flat[0], MemberFlatten):
        return None
    return twin


class StackedNetworks:
    """``K`` networks of one architecture as stacked parameters ``[K, ...]`` (leaf tensors,
    the ones to optimise), evaluated together on per-member inputs."""

    def __init__(self, modules: list[nn.Module]) -> None:
        if not modules or not all(stackable(m) for m in modules):
            raise ValueError("StackedNetworks needs networks without batch norm, dropout or "
                             "buffers")
        self.template = copy.deepcopy(modules[0]).to("meta")
        params, _ = stack_module_state(modules)
        self.names = list(params)
        self.parameters = [params[name] for name in self.names]
        self.members = len(modules)
        twin = grouped_twin(modules[0], self.members)
        self._forward = (self._vmapped_forward() if twin is None
                         else self._grouped_forward(twin))
        self.grouped = twin is not None

    def logits(self, x: Tensor) -> Tensor:
        """Logits ``[K, B, classes]`` of member inputs ``[K, B, ...]``."""
        return self._forward(x)

    def member_state(self, k: int) -> dict[str, Tensor]:
        """Member ``k``'s state dict (detached copies of its slices)."""
        return {name: p[k].detach().clone() for name, p in zip(self.names, self.parameters,
                                                                strict=True)}

    def load_member_states(self, states: list[dict[str, Tensor]]) -> None:
        """Copy one state dict per member into the stacked parameters."""
        with torch.no_grad():
            for name, p in zip(self.names, self.parameters, strict=True):
                p.copy_(torch.stack([state[name] for state in states]).to(p.device))

    def to(self, device: torch.device) -> StackedNetworks:
        """Move the stacked parameters to ``device`` (as new leaf tensors)."""
        self.parameters = [p.detach().to(device).requires_grad_(True) for p in self.parameters]
        return self

    def _params(self) -> dict[str, Tensor]:
        return dict(zip(self.names, self.parameters, strict=True))

    def _vmapped_forward(self) -> Callable[[Tensor], Tensor]:
        def one(params: dict[str, Tensor], x: Tensor) -> Tensor:
            return functional_call(self.template, params, (x,))

        batched = vmap(one)
        return lambda x: batched(self._params(), x)

    def _grouped_forward(self, twin: nn.Module) -> Callable[[Tensor], Tensor]:
        def forward(x: Tensor) -> Tensor:
            members, batch = x.shape[:2]
            side_by_side = x.transpose(0, 1).reshape(batch, members * x.shape[2], *x.shape[3:])
            if side_by_side.ndim == 4:
                side_by_side = side_by_side.contiguous(memory_format=torch.channels_last)
            return functional_call(twin, self._params(), (side_by_side,))

        return forward
