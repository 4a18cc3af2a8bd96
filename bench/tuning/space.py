"""Search spaces as data: the ``params`` block of a conf/tune/<space>.yaml file.

Each parameter has ``type`` (float, int or categorical), ``low``/``high`` (inclusive) or
``choices``, and ``log``. Optional ``field`` names the method field the value sets (default:
the parameter's own name) and ``transform: reciprocal`` hands over 1 / value instead (the
SSLA authors searched HMC's mass and ran with the inverse mass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.harness.errors import ConfigError, require_choice

PARAM_TYPES = ("float", "int", "categorical")
TRANSFORMS = ("identity", "reciprocal")
_KEYS = {
    "float": {"type", "low", "high", "log", "field", "transform"},
    "int": {"type", "low", "high", "log", "field", "transform"},
    "categorical": {"type", "choices", "field", "transform"},
}


def check_space(params: Mapping[str, Mapping[str, Any]]) -> None:
    """Raise a one-line ConfigError for a malformed parameter spec."""
    if not params:
        raise ConfigError("params is empty; a search space needs at least one parameter")
    for name, spec in params.items():
        key = f"params.{name}"
        kind = require_choice(f"{key}.type", spec.get("type"), PARAM_TYPES)
        for extra in sorted(set(spec) - _KEYS[kind]):
            choices = ", ".join(sorted(_KEYS[kind]))
            raise ConfigError(f"{key}.{extra} is not a key of a {kind} parameter; "
                              f"choose one of: {choices}")
        require_choice(f"{key}.transform", spec.get("transform", "identity"), TRANSFORMS)
        if kind == "categorical":
            choices = spec.get("choices")
            if not choices:
                raise ConfigError(f"{key}.choices={choices!r} is not valid; give a non-empty list")
            continue
        low, high = spec.get("low"), spec.get("high")
        number = int if kind == "int" else (int, float)
        if not all(isinstance(v, number) and not isinstance(v, bool) for v in (low, high)):
            raise ConfigError(f"{key}.low/high={low!r}/{high!r} are not valid; give two {kind}s")
        if low > high:
            raise ConfigError(f"{key}.low={low!r} is not valid; it must not exceed high={high!r}")
        for flag, on in (("log=true", spec.get("log", False)),
                         ("transform=reciprocal", spec.get("transform") == "reciprocal")):
            if on and low <= 0:
                raise ConfigError(f"{key}.low={low!r} is not valid with {flag}; it must be > 0")


def suggest(trial, params: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Draw every parameter from an Optuna ``trial``; returns the values by parameter name."""
    values: dict[str, Any] = {}
    for name, spec in params.items():
        kind, log = spec["type"], bool(spec.get("log", False))
        if kind == "float":
            values[name] = trial.suggest_float(name, float(spec["low"]), float(spec["high"]),
                                               log=log)
        elif kind == "int":
            values[name] = trial.suggest_int(name, int(spec["low"]), int(spec["high"]), log=log)
        else:
            values[name] = trial.suggest_categorical(name, list(spec["choices"]))
    return values


def to_fields(params: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]) -> dict:
    """Map searched values to method field names (``field``), applying ``transform``."""
    fields: dict[str, Any] = {}
    for name, spec in params.items():
        value = values[name]
        if spec.get("transform", "identity") == "reciprocal":
            value = 1.0 / value
        fields[spec.get("field") or name] = value
    return fields
