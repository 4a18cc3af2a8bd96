"""The tuning config: conf/tune.yaml plus one search space, composed and checked.

``space=<name>`` on the command line is checked against conf/tune/*.yaml and turned into the
group override ``tune@_global_=<name>``, which merges the space file into the root of the
config; every other override is checked against the composed keys, so a typo is reported as
one line naming the valid keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig, OmegaConf

from bench.harness.errors import ConfigError, require_choice
from bench.harness.overrides import CONF_DIR

CONFIG_NAME = "tune"
SPACE_DIR = CONF_DIR / "tune"
# The config group entry that merges conf/tune/<space>.yaml into the root of the config.
SPACE_GROUP = "tune@_global_"
DIRECTIONS = ("minimize", "maximize")


def space_options() -> list[str]:
    """Names of the search spaces in conf/tune/."""
    return sorted(p.stem for p in SPACE_DIR.glob("*.yaml"))


def hydra_overrides(overrides: list[str]) -> list[str]:
    """``overrides`` plus the group override that loads the chosen ``space``."""
    spaces = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "space"]
    if not spaces:
        raise ConfigError(f"space is required; choose one of: {', '.join(space_options())}")
    require_choice("space", spaces[-1], space_options())
    kept = [o for o in overrides if o.split("=", 1)[0] != SPACE_GROUP]
    return [*kept, f"{SPACE_GROUP}={spaces[-1]}"]


def compose_tune(overrides: list[str]) -> DictConfig:
    """The config ``python -m bench.tune <overrides>`` runs (single values, no sweeps).

    Overrides of Hydra's own settings (``hydra/launcher=...``, ``hydra.*``) are left out.
    """
    full = [o for o in hydra_overrides(overrides) if not o.lstrip("+~").startswith("hydra")]
    base = _compose([f"space={full[-1].split('=', 1)[1]}", full[-1]])
    _check_keys([o for o in full[:-1] if not o.startswith("space=")], base)
    return _compose(full)


def check_config(cfg: DictConfig) -> None:
    """Raise a one-line ConfigError for a value the tuner cannot use."""
    from bench.tuning.export import refuse_existing
    from bench.tuning.space import check_space
    from bench.tuning.study import storage_kind

    for key in ("space", "trials", "direction", "params", "objective.target"):
        if OmegaConf.is_missing(cfg, key) or OmegaConf.select(cfg, key) is None:
            raise ConfigError(f"{key} is required; set {key}=... or add it to the space file")
    _require_int("trials", cfg.trials, minimum=1)
    _require_int("seed", cfg.seed, minimum=0)
    _require_int("worker", cfg.worker, minimum=0)
    _require_int("objective.seed", cfg.objective.seed, minimum=0)
    if cfg.threads is not None:
        _require_int("threads", cfg.threads, minimum=0)
    require_choice("direction", cfg.direction, DIRECTIONS)
    if not isinstance(cfg.overwrite, bool):
        raise ConfigError(f"overwrite={cfg.overwrite!r} is not valid; choose one of: true, false")
    _require_name("study", cfg.study, example=f"{cfg.space} (the space's name, the default)")
    storage_kind(str(cfg.storage))
    check_space(OmegaConf.to_container(cfg.params, resolve=True))
    if cfg.export is not None:
        refuse_existing(Path(str(cfg.export)), cfg.overwrite)


def _require_int(key: str, value: Any, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{key}={value!r} is not valid; it must be an integer >= {minimum}")


def _require_name(key: str, value: Any, example: str) -> None:
    """A one-line ConfigError unless ``value`` is a non-empty text (``study=nan`` or
    ``study=12`` read as numbers, ``study=null`` as null: each can be quoted)."""
    if isinstance(value, str) and value:
        return
    if isinstance(value, str):
        typed, why, quote = "''", "it is empty", ""
    else:
        if isinstance(value, ListConfig | DictConfig):
            value = OmegaConf.to_container(value)
        typed = str(value)
        if value is None or isinstance(value, bool):
            typed = {None: "null", True: "true", False: "false"}[value]
        kinds = {bool: "a boolean", int: "an integer", float: "a number", list: "a list",
                 dict: "a mapping"}
        kind = "null" if value is None else kinds.get(type(value), type(value).__name__)
        why = f"it reads as {kind}, not a name"
        quote = "" if isinstance(value, list | dict) else f", or quote it: {key}='{typed}'"
    raise ConfigError(f"{key}={typed} is not valid: {why}; give a non-empty text name, e.g. "
                      f"{key}={example}{quote}")


def _compose(overrides: list[str]) -> DictConfig:
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name=CONFIG_NAME, overrides=overrides)
    except Exception as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        raise ConfigError(" ".join(lines[:3])) from None
    finally:
        GlobalHydra.instance().clear()


def _check_keys(overrides: list[str], base: DictConfig) -> None:
    """Name the valid keys when an override sets a key the config does not have."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as err:  # hydra raises its own OverrideParseException
        raise ConfigError(f"cannot parse overrides: {str(err).splitlines()[0]}") from None
    tree = OmegaConf.to_container(base, resolve=False)
    for override in parsed:
        key = override.key_or_group
        if override.is_add() or override.is_force_add() or override.is_delete():
            continue
        if key.startswith("hydra") or "@" in key:
            continue
        node, prefix = tree, ""
        for part in key.split("."):
            if not isinstance(node, dict):
                break
            if part not in node:
                choices = ", ".join(f"{prefix}{k}" for k in node)
                raise ConfigError(f"{prefix}{part} is not a key of the tuning config; "
                                  f"choose one of: {choices}")
            node, prefix = node[part], f"{prefix}{part}."


def first_values(overrides: list[str]) -> list[str]:
    """Each override with a sweep (``a=1,2``) cut to its first value, for checking."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as err:  # hydra raises its own OverrideParseException
        raise ConfigError(f"cannot parse overrides: {str(err).splitlines()[0]}") from None
    first = []
    for override in parsed:
        if override.is_sweep_override():
            value = next(iter(override.sweep_string_iterator()))
        else:
            value = override.get_value_element_as_str()
        first.append(f"{override.get_key_element()}={value}")
    return first
