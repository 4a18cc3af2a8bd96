"""Typed checks of command-line values against the composed config, before a task runs.

A value overriding a config key must have the type of the key's default: an integer key
(``seed``, ``task.n``) takes integers only (``1.5`` and ``abc`` are refused, never truncated),
a boolean key (``rerun_failed``) ``true`` or ``false`` only, a number key any number. A key the
config does not have is refused with the valid keys at that level (``+key=value`` adds one).
A list key (``temperatures``, ``dataset.sizes``) takes a list only, each element checked as
above against the type its default's elements share (``temperatures[0]='abc'`` is refused).
"""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from bench.harness.errors import ConfigError

_ABSENT = object()
# Integer keys must fit the 64-bit integers torch, numpy and the records hold.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def override_values(override) -> list[Any]:
    """The typed values of a parsed Hydra override (every value of a sweep)."""
    if override.is_sweep_override():
        return list(override.sweep_iterator())
    return [override.value()]


def check_value_type(key: str, value: Any, default: Any) -> None:
    """Raise a one-line ConfigError if ``value`` cannot replace ``default`` at ``key``."""
    if value is None or default is None:
        return
    if isinstance(default, list | ListConfig):
        _check_list(key, value, default)
    elif isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} is not valid; choose one of: true, false")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}={value!r} is not valid; it must be an integer")
        if not INT64_MIN <= value <= INT64_MAX:
            raise ConfigError(f"{key}={value!r} is not valid; it must lie in the 64-bit integer "
                              f"range [{INT64_MIN}, {INT64_MAX}]")
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}={value!r} is not valid; it must be a number")
        if not math.isfinite(float(value)):
            raise ConfigError(f"{key}={value!r} is not valid; it must be a finite number")


def _check_list(key: str, value: Any, default: list | ListConfig) -> None:
    """A list, each element checked against the kind of element the default holds."""
    element = _element_default(default)
    if not isinstance(value, list | ListConfig):
        raise ConfigError(f"{key}={value!r} is not valid; it must be a list"
                          f"{_ELEMENT_NOUNS.get(type(element), '')} in brackets: {key}=[...]")
    for index, item in enumerate(value):
        check_value_type(f"{key}[{index}]", item, element)


_ELEMENT_NOUNS = {bool: " of true/false", int: " of integers", float: " of numbers"}


def _element_default(default: list | ListConfig) -> Any:
    """A default element standing for all of ``default`` (a number when integers and numbers
    mix), or None (no check) when the list is empty, mixed or holds interpolations."""
    items = (OmegaConf.to_container(default, resolve=False)
             if isinstance(default, ListConfig) else default)
    kinds = {type(item) for item in items}
    if kinds == {int, float}:
        return 0.0
    return items[0] if len(kinds) == 1 else None


_INTERPOLATED = object()


def lookup(cfg: DictConfig, key: str) -> Any:
    """The value at dotted ``key`` (containers as they are, interpolations as a sentinel),
    or another sentinel when the key does not exist."""
    node: Any = cfg
    for part in key.split("."):
        if isinstance(node, DictConfig) and part in node:
            node = node._get_node(part)
        elif isinstance(node, ListConfig) and part.isdigit() and int(part) < len(node):
            node = node._get_node(int(part))
        else:
            return _ABSENT
        if node._is_interpolation():
            return _INTERPOLATED
        if not isinstance(node, DictConfig | ListConfig):
            node = node._value()
    return node


def check_key_exists(cfg: DictConfig, key: str) -> Any:
    """The default at ``key``; a one-line ConfigError listing the valid keys when absent."""
    found = lookup(cfg, key)
    if found is not _ABSENT:
        return found
    parent, _, leaf = key.rpartition(".")
    container = lookup(cfg, parent) if parent else cfg
    if isinstance(container, DictConfig) and not container._is_missing():
        where = f"under {parent}" if parent else "at the top level"
        keys = ", ".join(sorted(str(k) for k in container.keys()))
        raise ConfigError(f"{key}: no such config key; valid keys {where}: {keys} "
                          f"(prefix + to add a new key: +{key}=...)")
    raise ConfigError(f"{key}: no such config key ({parent or key} is not a config section)")


def _resolved_or_none(cfg: DictConfig, key: str) -> Any:
    """The resolved value of an interpolated key, or None when it cannot be resolved yet."""
    try:
        return OmegaConf.select(cfg, key, throw_on_resolution_failure=False)
    except Exception:  # noqa: BLE001 - a resolver that fails here fails later with its own error
        return None


def check_typed_overrides(cfg: DictConfig, parsed_overrides: list, groups: set[str]) -> None:
    """Check every ``key=value`` override (not groups, deletions or additions) against ``cfg``."""
    for override in parsed_overrides:
        key = override.key_or_group
        if (override.is_add() or override.is_force_add() or override.is_delete()
                or key in groups or key.startswith("hydra")):
            continue
        default = check_key_exists(cfg, key)
        if default is _INTERPOLATED:
            default = _resolved_or_none(cfg, key)
        for value in override_values(override):
            check_value_type(key, value, default)
