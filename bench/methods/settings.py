"""Settings sub-nodes that method nodes share, each a small frozen dataclass validated once.

A method node nests them by key (``conf/method/<name>.yaml``)::

    defaults: [/model@model: lenet_redux]  # ModelSettings at method.model (conf/model/)
    prediction: {batch_size: 1024}         # PredictionSettings at method.prediction

Hydra passes a nested node as a plain mapping; a method's ``__post_init__`` turns it into the
dataclass with :func:`settings_node`, which names the full key of an unknown or bad value in a
one-line :class:`~bench.harness.errors.ConfigError`
(``method.prediction.batch_size=0 is not valid; it must be a positive integer``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from torch import nn

from bench.harness.errors import ConfigError, require_choice, require_positive_int
from bench.harness.rng import derived_seed, make_generator
from bench.models.classifiers import CLASSIFIERS, build_classifier

Settings = TypeVar("Settings")

# The random stream a scratch network's initial weights come from (of the fit seed).
NETWORK_STREAM = (0,)


def settings_node(cls: type[Settings], value: Settings | Mapping[str, Any] | None) -> Settings:
    """``value`` as a ``cls`` (a settings dataclass with a ``KEY``): an instance as it is, a
    mapping by its keys, None as the defaults; a key ``cls`` does not take is a ConfigError."""
    if isinstance(value, cls):
        return value
    if value is None:
        return cls()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{cls.KEY}={value!r} is not valid; it must be a mapping of "
                          f"{', '.join(settings_keys(cls))}")
    unknown = sorted(set(value) - set(settings_keys(cls)))
    if unknown:
        raise ConfigError(f"{cls.KEY}.{unknown[0]} is not a setting of {cls.KEY}; choose from: "
                          f"{', '.join(settings_keys(cls))}")
    return cls(**value)


def settings_keys(cls: type) -> list[str]:
    """The keys a settings dataclass takes."""
    return [f.name for f in dataclasses.fields(cls) if f.init]


@dataclass(frozen=True)
class PredictionSettings:
    """``method.prediction``: the test inputs go through the method in chunks of ``batch_size``
    (a memory bound only: the predictive does not depend on it)."""

    batch_size: int = 1024
    KEY: ClassVar[str] = "method.prediction"

    def __post_init__(self) -> None:
        require_positive_int(f"{self.KEY}.batch_size", self.batch_size)


@dataclass(frozen=True)
class ModelSettings:
    """``method.model``: the network a method builds itself, a model of
    :data:`bench.models.classifiers.CLASSIFIERS` by ``name`` with the ``options`` it takes
    (``conf/model/<name>.yaml``)."""

    name: str = "lenet_redux"
    options: Mapping[str, Any] = field(default_factory=dict)
    KEY: ClassVar[str] = "method.model"

    def __post_init__(self) -> None:
        require_choice(f"{self.KEY}.name", self.name, CLASSIFIERS)
        if not isinstance(self.options, Mapping):
            raise ConfigError(f"{self.KEY}.options={self.options!r} is not valid; it must be a "
                              "mapping of option names to values")
        accepted = CLASSIFIERS[self.name].options
        for key in self.options:
            if key not in accepted:
                raise ConfigError(f"{self.KEY}.options.{key} is not an option of {self.name}; "
                                  f"its options: {', '.join(accepted) or 'none'}")
        object.__setattr__(self, "options", dict(self.options))

    def recipe(self) -> dict[str, Any]:
        """The network's entries of a stored-state recipe, named as before the sub-node
        (``network_model``, ``network_options``) so that stored states keep their hashes."""
        return {"network_model": self.name, "network_options": dict(self.options)}

    def build(self, seed: int, num_classes: int, in_channels: int) -> nn.Module:
        """The network on CPU, initialised from the fit ``seed``'s network stream."""
        generator = make_generator(derived_seed(seed, spawn_key=NETWORK_STREAM))
        return build_classifier(self.name, generator, num_classes=num_classes,
                                in_channels=in_channels, **self.options)
