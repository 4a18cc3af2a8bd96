"""Check command-line overrides before Hydra sees them, so mistakes cost one clear line."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser

from bench.harness.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def group_options(conf_dir: Path = CONF_DIR) -> dict[str, list[str]]:
    """Config groups (folders under conf/) mapped to their options (yaml names, nested too)."""
    groups: dict[str, list[str]] = {}
    for folder in sorted(p for p in conf_dir.rglob("*") if p.is_dir()):
        group = folder.relative_to(conf_dir).as_posix()
        options = sorted(
            f.relative_to(folder).with_suffix("").as_posix() for f in folder.rglob("*.yaml")
        )
        groups[group] = options
    for group in ("hydra/launcher",):
        groups.setdefault(group, [])
        groups[group] = sorted({*groups[group], "basic", "submitit_local", "submitit_slurm"})
    return groups


def _values(override) -> list[str]:
    if override.is_sweep_override():
        return [str(v) for v in override.sweep_string_iterator()]
    value = override.value()
    return ["null" if value is None else str(value)]


def check_overrides(overrides: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Raise ConfigError (one line) for an unknown group option, key or unparsable value."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as err:  # hydra raises its own OverrideParseException
        raise ConfigError(f"cannot parse overrides: {str(err).splitlines()[0]}") from None
    groups = group_options(conf_dir)
    first_values = []
    for override in parsed:
        key = override.key_or_group.lstrip("+~")
        values = _values(override)
        if key in groups and not override.is_delete():
            for value in values:
                if value != "null" and value not in groups[key]:
                    choices = ", ".join(groups[key])
                    raise ConfigError(f"{key}={value!r} is not valid; choose one of: {choices}")
        first_values.append(f"{override.get_key_element()}={values[0]}")
    _check_composes([o for o in first_values if not o.startswith("hydra")], conf_dir)


def _check_composes(overrides: list[str], conf_dir: Path) -> None:
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            compose(config_name="config", overrides=overrides)
    except Exception as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        message = " ".join(lines[:3])
        raise ConfigError(message) from None
    finally:
        GlobalHydra.instance().clear()


def _register_resolvers() -> None:
    from bench.harness.tuned import register_tuned_resolver

    register_tuned_resolver()


_register_resolvers()
