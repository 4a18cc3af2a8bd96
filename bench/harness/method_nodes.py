"""Method nodes: build the method a config node names, and read its variants.

A method node (``conf/method/<name>.yaml``) names its class in ``_target_``:
:func:`instantiate_method` builds it in one hop, with the task's arguments over the node's
values. The contract the classes follow is :class:`bench.contracts.method.Method`; nothing
here imports a method class.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from bench.harness.errors import ConfigError
from bench.harness.method_membership import MEMBERSHIP_KEY

# Keys of a method node that are data for the task, not constructor arguments.
VARIANTS_KEY = "variants"


def method_class(node: DictConfig) -> type:
    """The class a method node names in ``_target_``."""
    if "_target_" not in node:
        raise ConfigError(f"method {node.get('name')!r} has no _target_; a method node names "
                          "its class in _target_")
    return get_class(node._target_)


def method_arguments(cls: type) -> list[str]:
    """Names the class's constructor accepts (its dataclass fields that are init arguments)."""
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls) if f.init]
    return [name for name in inspect.signature(cls).parameters if name != "self"]


def instantiate_method(node: DictConfig, **arguments: Any) -> Any:
    """The method ``node`` names, with ``arguments`` over the node's own values.

    ``variants`` (row name -> arguments) is data for the task and ``appears_in`` data for the
    sweep (:mod:`bench.harness.method_membership`), neither passed on; a key the class
    does not take is a one-line ConfigError listing the keys it does take. Arguments may
    replace ``_target_`` (a variant that is another class of the same family).
    """
    values = OmegaConf.to_container(node, resolve=True)
    values.pop(VARIANTS_KEY, None)
    values.pop(MEMBERSHIP_KEY, None)
    values.update(arguments)
    cls = get_class(values["_target_"]) if "_target_" in values else method_class(node)
    accepted = method_arguments(cls)
    unknown = sorted(key for key in values if not key.startswith("_") and key not in accepted)
    if unknown:
        raise ConfigError(f"method.{unknown[0]} is not an argument of {cls.__name__}; "
                          f"choose from: {', '.join(accepted)}")
    return instantiate(values, _convert_="all")


def method_variants(node: DictConfig) -> Mapping[str, dict[str, Any]]:
    """Row name -> constructor arguments of each variant (one row, the method's name, if the
    node has no variants)."""
    variants = node.get(VARIANTS_KEY)
    if not variants:
        return {str(node.name): {}}
    return OmegaConf.to_container(variants, resolve=True)


def merged_method_node(node: DictConfig, settings: Mapping[str, Any] | None) -> DictConfig:
    """``node`` with ``settings`` merged on (new keys and nested dicts included: the composed
    node is a struct config, so the merge goes into a plain copy of its resolved values)."""
    if not settings:
        return node
    return OmegaConf.merge(OmegaConf.create(OmegaConf.to_container(node, resolve=True)),
                           settings)
