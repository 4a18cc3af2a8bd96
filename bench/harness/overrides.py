"""Check command-line overrides before Hydra sees them, so mistakes cost one clear line."""

from __future__ import annotations

import os
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Glob
from omegaconf import DictConfig, OmegaConf

from bench.harness.errors import ConfigError
from bench.harness.method_membership import check_side_run_method
from bench.harness.records import unwritable_reason
from bench.harness.validation import check_typed_overrides

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
RESULTS_ENV = "BENCH_RESULTS_DIR"
# The folders under results_dir that Hydra creates (hydra.run.dir, hydra.sweep.dir in
# conf/config.yaml).
HYDRA_FOLDERS = (".hydra", ".hydra/run", ".hydra/multirun")


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


def sweep_values(override, groups: dict[str, list[str]]) -> list[str]:
    """The values one parsed override stands for: a sweep's elements, a ``glob(...)`` of a
    config group expanded over the group's options, or the single value. A glob of a plain key
    (Hydra supports globs of groups only) or one matching no option is a ConfigError."""
    value = override.value()
    if isinstance(value, Glob):
        key = override.key_or_group.lstrip("+~")
        if key not in groups:
            raise ConfigError(f"{override.input_line} is not valid; "
                              "glob(...) selects options of a config group only, and "
                              f"{key} is not one")
        matched = value.filter(groups[key])
        if not matched:
            raise ConfigError(f"{override.input_line} matches no "
                              f"option; choose from: {', '.join(groups[key])}")
        return matched
    if override.is_sweep_override():
        return [str(v) for v in override.sweep_string_iterator()]
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
        values = sweep_values(override, groups)
        if key in groups and not override.is_delete():
            for value in values:
                if value != "null" and value not in groups[key]:
                    choices = ", ".join(groups[key])
                    raise ConfigError(f"{key}={value!r} is not valid; choose one of: {choices}")
        first = values[0] if override.is_sweep_override() else override.get_value_element_as_str()
        first_values.append(f"{override.get_key_element()}={first}")
    chosen = {p.key_or_group.lstrip("+~"): sweep_values(p, groups) for p in parsed
              if not p.is_delete()}
    for experiment in chosen.get("experiment", []):
        check_side_run_method(experiment, chosen.get("method", []), conf_dir)
    is_selection = [p.key_or_group.lstrip("+~") in groups for p in parsed]
    selections = [o for o, chosen in zip(first_values, is_selection, strict=True)
                  if chosen and not o.startswith("hydra")]
    cfg = _check_composes(selections, conf_dir)
    check_typed_overrides(cfg, parsed, set(groups))
    _check_applies(cfg, [o for o, chosen in zip(first_values, is_selection, strict=True)
                         if not chosen and not o.startswith("hydra")])


def _check_applies(cfg: DictConfig, overrides: list[str]) -> None:
    """Apply the plain ``key=value`` overrides to ``cfg`` (composed from the group selections)
    the way Hydra's composition applies them after the defaults list, so a key Hydra would
    refuse is one line here, without composing the whole config a second time."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    try:
        ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
    except Exception as err:
        raise ConfigError(_first_lines(err)) from None


def _check_composes(overrides: list[str], conf_dir: Path) -> DictConfig:
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            return compose(config_name="config", overrides=overrides)
    except Exception as err:
        if _interrupted(err):  # Ctrl-C while Hydra composed: not a config error
            raise KeyboardInterrupt from None
        raise ConfigError(_first_lines(err)) from None
    finally:
        GlobalHydra.instance().clear()


def _first_lines(err: BaseException) -> str:
    """Hydra's error message as one line: its first three non-blank lines joined."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return " ".join(lines[:3])


def _interrupted(err: BaseException) -> bool:
    """Whether ``err`` was raised while handling Ctrl-C (somewhere in its chain)."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, KeyboardInterrupt):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def env_or_default(name: str, default: str) -> str:
    """``$name`` when set to something other than blanks, else ``default`` (empty = unset)."""
    return os.environ.get(name, "").strip() or default


def drop_empty_results_dir(overrides: list[str]) -> list[str]:
    """The overrides without ``results_dir=`` (empty), which means the default folder."""
    return [o for o in overrides if o.strip() not in ("results_dir=", "results_dir=''",
                                                      'results_dir=""')]


def require_writable_results_dir(overrides: list[str]) -> Path:
    """The results folder the overrides choose (else the default), created and writable, or
    a one-line ConfigError: Hydra writes its run folder there before any job starts."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.startswith("results_dir=")]
    folder = Path(chosen[-1]) if chosen and chosen[-1] else default_results_dir()
    reason = unwritable_reason(folder)
    if reason:
        raise ConfigError(f"results_dir={str(folder)!r} cannot be written ({reason}); set "
                          "results_dir= or BENCH_RESULTS_DIR to a writable folder")
    for name in HYDRA_FOLDERS:
        path = folder / name
        if os.path.lexists(path) and not path.is_dir():
            raise ConfigError(f"results_dir={str(folder)!r} cannot be used: {path} is a file "
                              "where Hydra's run folders belong; move it away or set "
                              "results_dir= or BENCH_RESULTS_DIR to another folder")
    return folder


def default_results_dir() -> Path:
    """``$BENCH_RESULTS_DIR`` if set and not empty, else ``./results``."""
    return Path(env_or_default(RESULTS_ENV, "results"))


def _register_resolvers() -> None:
    from bench.harness.tuned import register_tuned_resolver

    register_tuned_resolver()
    if not OmegaConf.has_resolver("env_or"):
        OmegaConf.register_new_resolver("env_or", env_or_default)


_register_resolvers()
