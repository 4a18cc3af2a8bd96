"""Hydra entry point for Optuna tuning: ``python -m bench.tune space=mlp [trials=N] ...``.

``space=<name>`` loads the search space conf/tune/<name>.yaml (trials, direction, objective,
params) on top of conf/tune.yaml; every other key is an ordinary override (``storage=``,
``study=``, ``seed=``, ``worker=``, ``export=``, ``overwrite=``, ``objective.<option>=``,
``params.<name>.high=``). The study lives in persistent storage (SQLite under
``results/tuning/`` by default; any RDB URL or an Optuna journal file) and is continued, not
restarted, by a rerun or by further workers: ``trials`` is the total the study should hold.
A trial whose objective raises or returns NaN/inf is marked FAILED with its error kept as the
user attr ``error``, and the study goes on. ``export=<path>`` writes the best trial's values
as a conf/tuned/ YAML file. Bad input stops with one ``error:`` line and exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from bench.harness.errors import ConfigError
from bench.harness.overrides import CONF_DIR
from bench.tuning.config import (
    CONFIG_NAME,
    SPACE_GROUP,
    check_config,
    compose_tune,
    first_values,
    hydra_overrides,
    space_options,
)

_HELP_FLAGS = ("--help", "-h", "--hydra-help", "--info", "-i")


def tune(cfg: DictConfig) -> dict[str, Any]:
    """Run the study of ``cfg`` up to ``cfg.trials`` finished trials, then export if asked.

    Returns the study summary (counts per state, best value and params, trials run here).
    """
    from bench.tuning import study as studies
    from bench.tuning.export import tuned_yaml, write_text_atomically

    check_config(cfg)
    if cfg.threads:
        import torch

        torch.set_num_threads(int(cfg.threads))
    params = OmegaConf.to_container(cfg.params, resolve=True)
    options = OmegaConf.to_container(cfg.objective, resolve=True)
    target, seed = options.pop("target"), options.pop("seed")
    settings = {"space": cfg.space, "direction": cfg.direction, "seed": cfg.seed,
                "params": params, "objective": {"target": target, "seed": seed, **options}}
    function = studies.resolve_target(target)
    study = studies.load_study(cfg.study, str(cfg.storage), cfg.seed, cfg.worker,
                               cfg.direction, settings)
    stale = studies.fail_stale_trials(study, float(cfg.stale_after_s))
    objective = studies.trial_objective(function, params, seed, options)
    ran = studies.run_remaining(study, objective, cfg.trials)
    summary = {**studies.summarize(study), "ran": ran, "stale": stale,
               "storage": studies.describe_storage(str(cfg.storage))}
    print(_summary_line(summary, cfg.trials))
    if cfg.export is not None:
        text = tuned_yaml(study, params, cfg.space, str(cfg.storage), cfg.seed)
        summary["export"] = write_text_atomically(Path(str(cfg.export)), text, cfg.overwrite)
        print(f"exported the best trial to {summary['export']}")
    return summary


@hydra.main(config_path=str(CONF_DIR), config_name=CONFIG_NAME, version_base="1.3")
def hydra_main(cfg: DictConfig) -> None:
    """Hydra-decorated job function (one call per worker of a run or multirun)."""
    from bench.tuning.export import NothingToExport

    try:
        tune(cfg)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except NothingToExport as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    """Check the command line (one-line errors, exit code 2), then hand it to Hydra."""
    argv = sys.argv[1:] if argv is None else argv
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    asks_help = any(a in _HELP_FLAGS for a in argv)
    try:
        group = hydra_overrides(overrides)[-1]
        if not asks_help:
            check_config(compose_tune(first_values(overrides)))
    except ConfigError as err:
        if asks_help:
            print(f"{__doc__}\nSearch spaces: {', '.join(space_options())}")
            return
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    # The group override goes beside space=..., where Hydra's parser expects overrides.
    argv = [b for a in argv if a.split("=", 1)[0] != SPACE_GROUP
            for b in ([a, group] if a.split("=", 1)[0] == "space" else [a])]
    sys.argv = [sys.argv[0], *argv]
    hydra_main()


def _summary_line(summary: dict[str, Any], trials: int) -> str:
    counts = summary["counts"]
    line = (f"study {summary['study']}: {summary['finished']}/{trials} trials finished "
            f"({counts['complete']} complete, {counts['fail']} failed, {counts['pruned']} "
            f"pruned), {summary['ran']} run now; storage {summary['storage']}")
    if summary.get("stale"):
        line += (f"; {len(summary['stale'])} trial(s) left running by a stopped worker marked "
                 f"failed: {', '.join(map(str, summary['stale']))}")
    if "best_value" in summary:
        line += (f"; best {summary['best_value']:.6g} at trial {summary['best_trial']}: "
                 f"{summary['best_params']}")
    return line


if __name__ == "__main__":
    raise SystemExit(main())
