"""Image classifiers of the classification papers, built by name with initial weights drawn
from an explicit ``torch.Generator``.

``build_classifier("lenet5", generator=make_generator(0))`` gives the same weights for the same
generator seed on every call and every device: modules are created on the meta device (no
global RNG draw), materialised on CPU, initialised layer by layer in module order from the
generator, then moved to ``device``. Inputs are ``[n, C, H, W]`` images, outputs ``[n, K]``
logits. The networks:

- ``lenet5``: LeNet-5 of the Generalized Laplace paper's Table 1 (padded first conv, 400
  features into the head), 61,706 parameters on 1x28x28.
- ``lenet_redux``: Laplace Redux's LeNet (unpadded convs, 256 features), 44,426 parameters.
- ``mlp``: 784-100-100-10 ReLU on flattened 28x28 images, 89,610 parameters; a module view of
  the project's flat :class:`bench.models.mlp.MLPShape` network (same layout, same init).
- ``resnet18``: torchvision's ResNet-18 with a K-way head, 11,181,642 parameters for K = 10;
  option ``width`` (default 64) scales the stage widths (same layout, a smoke-test stand-in).
- ``wrn16_4``: the outlier-exposure WRN-16-4 (pre-activation blocks, dropout 0.3), 2,748,890.
- ``binary_cnn``: the GGN thesis' CNN for MNIST 4 vs 9 with one Bernoulli logit, 4,587
  parameters (layout: reproduction notes section 6 [R]); built for ``num_classes=2`` only, as
  :class:`TwoClassLogits` around :class:`BinaryCNN`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from bench.harness.errors import ConfigError, require_choice
from bench.models.mlp import MLPShape, init_parameters

BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def default_layer_init(module: nn.Module, generator: torch.Generator) -> None:
    """PyTorch's own ``reset_parameters`` for conv and linear layers, drawn from ``generator``:
    weight and bias uniform on +-1/sqrt(fan_in) (kaiming_uniform with a = sqrt(5))."""
    if not isinstance(module, nn.Conv2d | nn.Linear):
        return
    nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
    if module.bias is not None:
        fan_in = module.weight[0].numel()
        bound = 1 / math.sqrt(fan_in)
        nn.init.uniform_(module.bias, -bound, bound, generator=generator)


def he_fan_out_conv_init(module: nn.Module, generator: torch.Generator) -> None:
    """Conv weights N(0, 2 / (k*k*out_channels)) (He, fan-out), batch norm weight 1 and bias 0,
    linear layers PyTorch's default; the initialisation of torchvision's ResNets."""
    if isinstance(module, nn.Conv2d):
        nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu",
                                generator=generator)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.BatchNorm2d):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
    else:
        default_layer_init(module, generator)


def wrn_init(module: nn.Module, generator: torch.Generator) -> None:
    """He fan-out convs and unit batch norms as :func:`he_fan_out_conv_init`, and linear biases
    set to zero (the outlier-exposure WRN code's choice)."""
    he_fan_out_conv_init(module, generator)
    if isinstance(module, nn.Linear):
        nn.init.zeros_(module.bias)


class LeNet(nn.Module):
    """Two 5x5 conv + ReLU + 2x2 max-pool stages (6 and 16 channels), then 120-84-K fully
    connected with ReLUs. ``padding=2`` on the first conv (LeNet-5 of the Generalized Laplace
    paper) keeps 28x28 inputs at 5x5x16 = 400 head features; ``padding=0`` (Laplace Redux)
    gives 4x4x16 = 256."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1, padding: int = 2,
                 image_size: int = 28) -> None:
        super().__init__()
        side = ((image_size + 2 * padding - 4) // 2 - 4) // 2
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, 5, padding=padding), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
        self.head = nn.Sequential(
            nn.Linear(16 * side * side, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[n, K]`` of images ``[n, C, H, W]``."""
        return self.head(self.features(x))


class PreActBlock(nn.Module):
    """Pre-activation residual block: BN-ReLU-conv3x3(stride)-BN-ReLU-dropout-conv3x3, added to
    the input, or to a 1x1 strided conv of the pre-activated input when the width changes."""

    def __init__(self, in_width: int, out_width: int, stride: int, dropout: float) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_width)
        self.conv1 = nn.Conv2d(in_width, out_width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_width)
        self.conv2 = nn.Conv2d(out_width, out_width, 3, padding=1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.shortcut = (None if in_width == out_width and stride == 1
                         else nn.Conv2d(in_width, out_width, 1, stride=stride, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output feature map."""
        activated = torch.relu(self.bn1(x))
        out = self.conv1(activated)
        out = self.conv2(self.dropout(torch.relu(self.bn2(out))))
        return out + (x if self.shortcut is None else self.shortcut(activated))


class WideResNet(nn.Module):
    """WRN-depth-k with pre-activation blocks: a 3x3 conv to 16 channels, three groups of
    (depth - 4) / 6 blocks at widths 16k, 32k, 64k (strides 1, 2, 2), then BN, ReLU, global
    average pooling (8x8 on 32x32 inputs) and a linear head."""

    def __init__(self, depth: int = 16, widen: int = 4, num_classes: int = 10,
                 in_channels: int = 3, dropout: float = 0.3) -> None:
        super().__init__()
        if (depth - 4) % 6:
            raise ConfigError(f"model.depth={depth!r} is not valid; it must be 6n + 4")
        blocks_per_group = (depth - 4) // 6
        widths = (16, 16 * widen, 32 * widen, 64 * widen)
        layers: list[nn.Module] = [nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False)]
        for group, stride in enumerate((1, 2, 2)):
            for i in range(blocks_per_group):
                in_width = widths[group] if i == 0 else widths[group + 1]
                layers.append(PreActBlock(in_width, widths[group + 1], stride if i == 0 else 1,
                                          dropout))
        self.features = nn.Sequential(*layers)
        self.bn = nn.BatchNorm2d(widths[-1])
        self.fc = nn.Linear(widths[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[n, K]`` of images ``[n, C, H, W]``."""
        out = torch.relu(self.bn(self.features(x)))
        return self.fc(out.mean(dim=(2, 3)))


class BinaryCNN(nn.Module):
    """Two 5x5 conv + ReLU + 2x2 max-pool stages (1 -> 3 -> 10 channels, no padding), then
    linear 160 -> 20 -> 24 -> 1 with ReLUs between: one logit per 28x28 image, 78 + 760 +
    3220 + 504 + 25 = 4587 parameters (the thesis' P; its channel and kernel sizes are the
    reproduction notes' choice)."""

    def __init__(self, in_channels: int = 1) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 3, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(3, 10, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(160, 20), nn.ReLU(), nn.Linear(20, 24), nn.ReLU(),
                                  nn.Linear(24, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[n, 1]`` of images ``[n, C, 28, 28]``."""
        return self.head(self.features(x))


class TwoClassLogits(nn.Module):
    """A network with one Bernoulli logit ``f`` seen as a two-class classifier with logits
    ``[0, f]``: the softmax is ``(1 - s(f), s(f))`` and the cross-entropy of label y in {0, 1}
    is the Bernoulli negative log-likelihood of ``f``, so the one training loop and the
    classification metrics serve it unchanged, with the parameters of ``logit_net`` only."""

    def __init__(self, logit_net: nn.Module) -> None:
        super().__init__()
        self.logit_net = logit_net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[n, 2]`` = ``[0, f(x)]``."""
        f = self.logit_net(x).reshape(len(x), 1)
        return torch.cat([torch.zeros_like(f), f], dim=1)


def bernoulli_logit_network(module: nn.Module) -> nn.Module:
    """The single-logit network inside a :class:`TwoClassLogits`, or ``module`` itself."""
    return module.logit_net if isinstance(module, TwoClassLogits) else module


def _binary_cnn(num_classes: int, in_channels: int, generator: torch.Generator) -> nn.Module:
    if num_classes != 2:
        raise ConfigError(f"num_classes={num_classes!r} is not valid for binary_cnn; it has one "
                          "Bernoulli logit, so num_classes must be 2")
    return TwoClassLogits(initialised(lambda: BinaryCNN(in_channels), default_layer_init,
                                      generator))


def _resnet18(num_classes: int, in_channels: int, width: int = 64) -> nn.Module:
    from torchvision.models import resnet18

    if width != 64:
        return _scaled_resnet18(num_classes, in_channels, width)
    net = resnet18(num_classes=num_classes)
    if in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
    return net


def _scaled_resnet18(num_classes: int, in_channels: int, width: int) -> nn.Module:
    """torchvision's ResNet-18 layout (same modules, names and strides) with stage widths
    ``width * (1, 2, 4, 8)`` instead of 64..512: a cheap stand-in for smoke tests."""
    from torchvision.models.resnet import BasicBlock, ResNet

    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise ConfigError(f"model.width={width!r} is not valid; it must be a positive integer")

    class ScaledResNet18(ResNet):
        def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
            if planes == 64:
                self.inplanes = width
            return super()._make_layer(block, planes * width // 64, blocks, stride, dilate)

    net = ScaledResNet18(BasicBlock, [2, 2, 2, 2], num_classes=num_classes)
    net.conv1 = nn.Conv2d(in_channels, width, 7, stride=2, padding=3, bias=False)
    net.bn1 = nn.BatchNorm2d(width)
    net.fc = nn.Linear(8 * width, num_classes)
    return net


def _widen(widen: int) -> int:
    """The WRN widening factor (4: WRN-16-4; 1: a cheap stand-in for smoke tests)."""
    if not isinstance(widen, int) or isinstance(widen, bool) or widen < 1:
        raise ConfigError(f"model.widen={widen!r} is not valid; it must be a positive integer")
    return widen


def initialised(build: Callable[[], nn.Module],
                initialise: Callable[[nn.Module, torch.Generator], None],
                generator: torch.Generator) -> nn.Module:
    """``build()`` run on the meta device (drawing nothing), materialised on CPU, with batch
    norm statistics reset and ``initialise(module, generator)`` applied to every submodule in
    module order."""
    with torch.device("meta"):
        net = build()
    net = net.to_empty(device="cpu")
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, BATCH_NORMS):
                module.reset_running_stats()
            initialise(module, generator)
    return net


def _mlp(num_classes: int, in_channels: int, generator: torch.Generator) -> nn.Module:
    shape = MLPShape((in_channels * 28 * 28, 100, 100, num_classes), "relu")
    return nn.Sequential(nn.Flatten(), *shape.module(init_parameters(shape, generator)))


@dataclass(frozen=True)
class ClassifierSpec:
    """One named network: ``make(num_classes, in_channels, generator, **options)`` returns it
    initialised on CPU; ``in_channels`` is its default input depth, ``options`` the settings
    it accepts."""

    make: Callable[..., nn.Module]
    in_channels: int
    options: tuple[str, ...] = ()


CLASSIFIERS: dict[str, ClassifierSpec] = {
    "lenet5": ClassifierSpec(lambda k, c, g: initialised(
        lambda: LeNet(k, c, padding=2), default_layer_init, g), 1),
    "lenet_redux": ClassifierSpec(lambda k, c, g: initialised(
        lambda: LeNet(k, c, padding=0), default_layer_init, g), 1),
    "mlp": ClassifierSpec(_mlp, 1),
    "resnet18": ClassifierSpec(lambda k, c, g, width=64: initialised(
        lambda: _resnet18(k, c, width), he_fan_out_conv_init, g), 3, ("width",)),
    "wrn16_4": ClassifierSpec(lambda k, c, g, dropout=0.3, widen=4: initialised(
        lambda: WideResNet(16, _widen(widen), k, c, dropout), wrn_init, g), 3,
        ("dropout", "widen")),
    "binary_cnn": ClassifierSpec(_binary_cnn, 1),
}


def build_classifier(name: str, generator: torch.Generator, *, num_classes: int = 10,
                     in_channels: int | None = None, device: str | torch.device | None = None,
                     **options: Any) -> nn.Module:
    """The network ``name`` (one of :data:`CLASSIFIERS`) with initial weights drawn from the
    CPU ``generator`` (so the weights do not depend on ``device``), on ``device``, in train mode.

    ``in_channels`` defaults to the network's (1 for the MNIST networks, 3 for the CIFAR ones);
    ``options`` are the network's own settings (``wrn16_4``: ``dropout``, default 0.3, and
    ``widen``, default 4;
    ``resnet18``: ``width``, default 64).
    """
    spec = CLASSIFIERS[require_choice("model.name", name, CLASSIFIERS)]
    for key, value in options.items():
        if key not in spec.options:
            raise ConfigError(f"model.{key}={value!r} is not an option of {name}; its options: "
                              f"{', '.join(spec.options) or 'none'}")
    channels = spec.in_channels if in_channels is None else in_channels
    net = spec.make(num_classes, channels, generator, **options)
    return net if device is None else net.to(device)


def has_batch_norm(module: nn.Module) -> bool:
    """Whether ``module`` holds batch norm layers (train mode and eval mode differ)."""
    return any(isinstance(m, BATCH_NORMS) for m in module.modules())


def count_parameters(module: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
