"""The WILDS benchmark networks as a feature body and a linear last layer, and the official
WILDS checkpoints loaded into them.

Architectures (the WILDS example code's models, built here from torchvision / transformers):

==================  ===================================================================
``densenet121``     torchvision DenseNet-121 (Camelyon17, FMoW); ``options`` may shrink it
                    (``growth_rate``, ``block_config``, ``num_init_features``: the same
                    class and parameter names, for tests); last layer ``classifier``
``resnet18_ms``     torchvision ResNet-18 with an ``in_channels``-channel first convolution
                    (PovertyMap: 8), WILDS' multispectral ResNet-18; last layer ``fc``
``distilbert``      transformers' DistilBERT for sequence classification (CivilComments,
                    Amazon), configuration ``distilbert-base-uncased`` (weights come from
                    the checkpoint); last layer ``classifier``
``tiny_cnn``        stand-in for the image networks in tests: one 3 x 3 convolution, ReLU,
                    global average pooling; last layer ``classifier``
``bag_of_words``    stand-in for DistilBERT in tests: mean of token embeddings over the mask,
                    then (``model`` form) ``pre_classifier`` + ReLU as DistilBERT's head;
                    last layer ``classifier``
==================  ===================================================================

A WILDS checkpoint (``torch.save`` of ``{"algorithm": state, ...}``) comes in two forms:
``model.<keys>`` (ERM, IRM, groupDRO: the whole network, its last layer under the
architecture's last-layer name) or ``featurizer.<keys>`` + ``classifier.<keys>`` (deepCORAL:
the network without its last layer, then a linear layer). Both map onto
:class:`FeatureNetwork` (``body.*``, ``head.*``); for DistilBERT the featurizer form is the
bare DistilBERT encoder (first token's hidden state) without the ``pre_classifier`` layer.
Keys outside those prefixes are the algorithm's own state and are ignored. A checkpoint whose
network keys or shapes do not match the architecture stops with one line naming the file.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from bench.harness.errors import ConfigError, require_choice
from bench.harness.rng import seeded_global_rng

ARCHITECTURES = ("densenet121", "resnet18_ms", "distilbert", "tiny_cnn", "bag_of_words")
LAST_LAYER = {"densenet121": "classifier", "resnet18_ms": "fc", "distilbert": "classifier",
              "tiny_cnn": "classifier", "bag_of_words": "classifier"}
FORMS = ("model", "featurizer")
# Buffers some transformers releases save and others rebuild (not learned).
REBUILT_BUFFERS = ("position_ids",)


class FeatureNetwork(nn.Module):
    """``head(body(x))``: ``body`` maps inputs to the last layer's inputs, ``head`` is the
    last layer (``nn.Linear``)."""

    def __init__(self, body: nn.Module, head: nn.Linear) -> None:
        super().__init__()
        self.body = body
        self.head = head

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(x))


class TokenModel(nn.Module):
    """A transformers model fed WILDS' ``[batch, length, 2]`` (ids, mask) tokens; returns the
    classification output (``model`` form, last layer removed) or the first token's hidden
    state (``featurizer`` form)."""

    def __init__(self, net: nn.Module, form: str) -> None:
        super().__init__()
        self.net = net
        self.form = form

    def forward(self, x: Tensor) -> Tensor:
        out = self.net(input_ids=x[..., 0], attention_mask=x[..., 1])
        return out.logits if self.form == "model" else out.last_hidden_state[:, 0]


class TinyCNN(nn.Module):
    """Stand-in image body: conv 3 x 3 (``width`` channels), ReLU, global average pool."""

    def __init__(self, in_channels: int = 3, width: int = 8) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, width, kernel_size=3, padding=1)
        self.out_features = width

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(self.conv(x)).mean(dim=(-2, -1))


class BagOfWords(nn.Module):
    """Stand-in text body: token embeddings averaged over the attention mask, then (``model``
    form) ``pre_classifier`` and ReLU, as DistilBERT's classification head before its last
    layer."""

    def __init__(self, vocab_size: int = 1000, dim: int = 16, form: str = "model") -> None:
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, dim)
        self.pre_classifier = nn.Linear(dim, dim) if form == "model" else None
        self.out_features = dim

    def forward(self, x: Tensor) -> Tensor:
        ids, mask = x[..., 0], x[..., 1].unsqueeze(-1).to(torch.float32)
        pooled = (self.embeddings(ids) * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)
        return pooled if self.pre_classifier is None else torch.relu(self.pre_classifier(pooled))


def _densenet(options: dict[str, Any]) -> tuple[nn.Module, int]:
    from torchvision import models as vision_models  # slow import: on use

    net = vision_models.DenseNet(growth_rate=int(options.get("growth_rate", 32)),
                                 block_config=tuple(options.get("block_config", (6, 12, 24, 16))),
                                 num_init_features=int(options.get("num_init_features", 64)))
    width = net.classifier.in_features
    net.classifier = nn.Identity()
    return net, width


def _resnet18_ms(options: dict[str, Any]) -> tuple[nn.Module, int]:
    from torchvision import models as vision_models  # slow import: on use

    net = vision_models.resnet18()
    net.conv1 = nn.Conv2d(int(options.get("in_channels", 8)), 64, kernel_size=7, stride=2,
                          padding=3, bias=False)
    width = net.fc.in_features
    net.fc = nn.Identity()
    return net, width


def _distilbert(options: dict[str, Any], n_outputs: int, form: str) -> tuple[nn.Module, int]:
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise ConfigError("dataset.network.architecture='distilbert' needs the transformers "
                          "package (pip install -e '.[wilds]'); choose one of: bag_of_words "
                          "(a stand-in)") from None
    config = transformers.DistilBertConfig(num_labels=n_outputs, **options)
    if form == "featurizer":
        return TokenModel(transformers.DistilBertModel(config), form), config.dim
    net = transformers.DistilBertForSequenceClassification(config)
    net.classifier = nn.Identity()
    return TokenModel(net, form), config.dim


def build_body(architecture: str, n_outputs: int, options: dict[str, Any] | None = None,
               form: str = "model") -> tuple[nn.Module, int]:
    """The body of ``architecture`` (inputs -> last-layer inputs) and its output width."""
    require_choice("dataset.network.architecture", architecture, ARCHITECTURES)
    require_choice("checkpoint form", form, FORMS)
    options = dict(options or {})
    if architecture == "densenet121":
        return _densenet(options)
    if architecture == "resnet18_ms":
        return _resnet18_ms(options)
    if architecture == "distilbert":
        return _distilbert(options, n_outputs, form)
    if architecture == "tiny_cnn":
        body = TinyCNN(int(options.get("in_channels", 3)), int(options.get("width", 8)))
        return body, body.out_features
    body = BagOfWords(int(options.get("vocab_size", 1000)), int(options.get("dim", 16)), form)
    return body, body.out_features


def build_network(architecture: str, n_outputs: int, options: dict[str, Any] | None = None,
                  form: str = "model", generator: torch.Generator | None = None
                  ) -> FeatureNetwork:
    """An untrained :class:`FeatureNetwork`; ``generator`` seeds its initial weights (the
    libraries' constructors draw from the global RNG, seeded and restored around them)."""
    if generator is None:
        body, width = build_body(architecture, n_outputs, options, form)
        return FeatureNetwork(body, nn.Linear(width, n_outputs))
    with seeded_global_rng(int(torch.randint(2**62, (1,), generator=generator))):
        body, width = build_body(architecture, n_outputs, options, form)
        return FeatureNetwork(body, nn.Linear(width, n_outputs))


def checkpoint_form(state: dict[str, Tensor]) -> str:
    """``featurizer`` when the state has ``featurizer.*`` keys, ``model`` for ``model.*``."""
    if any(key.startswith("featurizer.") for key in state):
        return "featurizer"
    if any(key.startswith("model.") for key in state):
        return "model"
    return ""


def network_state(state: dict[str, Tensor], architecture: str, form: str) -> dict[str, Tensor]:
    """The checkpoint's network tensors under :class:`FeatureNetwork`'s names."""
    prefix = "net." if architecture == "distilbert" else ""
    last = LAST_LAYER[architecture]
    mapped = {}
    for key, value in state.items():
        if form == "model" and key.startswith("model."):
            inner = key[len("model."):]
            if inner.startswith(f"{last}."):
                mapped["head." + inner[len(last) + 1:]] = value
            else:
                mapped[f"body.{prefix}{inner}"] = value
        elif form == "featurizer" and key.startswith("featurizer."):
            mapped[f"body.{prefix}{key[len('featurizer.'):]}"] = value
        elif form == "featurizer" and key.startswith("classifier."):
            mapped["head." + key[len("classifier."):]] = value
    return mapped


def read_checkpoint_state(path: str | Path) -> dict[str, Tensor]:
    """The ``algorithm`` state of a WILDS checkpoint file."""
    try:
        # WILDS checkpoints also hold the epoch and best validation metric as numpy scalars,
        # which the weights-only unpickler refuses; these are files the user names.
        saved = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise ConfigError(f"checkpoint {path} cannot be read by torch.load "
                          f"({type(err).__name__})") from None
    state = saved.get("algorithm") if isinstance(saved, dict) else None
    if not isinstance(state, dict):
        raise ConfigError(f"checkpoint {path} has no 'algorithm' state: not a WILDS checkpoint")
    return state


def _mismatch(path: str | Path, architecture: str, n_outputs: int, detail: str) -> ConfigError:
    return ConfigError(f"checkpoint {path} does not match dataset.network.architecture="
                       f"{architecture!r} with {n_outputs} outputs: {detail}")


def load_checkpoint(path: str | Path, architecture: str, n_outputs: int,
                    options: dict[str, Any] | None = None) -> FeatureNetwork:
    """The network of a WILDS checkpoint file, in eval mode, on the CPU (module docstring)."""
    state = read_checkpoint_state(path)
    form = checkpoint_form(state)
    if not form:
        raise _mismatch(path, architecture, n_outputs, "no model.* or featurizer.* keys")
    network = build_network(architecture, n_outputs, options, form)
    wanted = network.state_dict()
    mapped = network_state(state, architecture, form)
    for key, value in mapped.items():
        if key in wanted and tuple(value.shape) != tuple(wanted[key].shape):
            raise _mismatch(path, architecture, n_outputs,
                            f"{key} has shape {tuple(value.shape)}, the network "
                            f"{tuple(wanted[key].shape)}")
    unexpected = sorted(k for k in set(mapped) - set(wanted)
                        if not k.endswith(REBUILT_BUFFERS))
    missing = sorted(k for k in set(wanted) - set(mapped) if not k.endswith(REBUILT_BUFFERS))
    if missing or unexpected:
        key = (missing or unexpected)[0]
        what = "missing" if missing else "unexpected"
        more = len(missing) + len(unexpected) - 1
        raise _mismatch(path, architecture, n_outputs,
                        f"{what} key {key}" + (f" and {more} more" if more else ""))
    network.load_state_dict({k: v for k, v in mapped.items() if k in wanted}, strict=False)
    return network.eval()


@torch.no_grad()
def features_and_outputs(network: FeatureNetwork, loader: DataLoader, device: str
                         ) -> tuple[Tensor, Tensor]:
    """Last-layer inputs ``[N, D]`` and outputs ``[N, K]`` of ``network`` (eval mode) over a
    loader of ``(inputs, targets)`` batches, in float32 on the CPU."""
    network = network.to(device).eval()
    features, outputs = [], []
    for inputs, _ in loader:
        hidden = network.body(inputs.to(device))
        features.append(hidden.float().cpu())
        outputs.append(network.head(hidden).float().cpu())
    return torch.cat(features), torch.cat(outputs)
