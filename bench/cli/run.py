"""Hydra entry point: ``python -m bench.run experiment=ssla/figure-1 scale=cpu seed=42``.

One job = one record (:func:`bench.harness.jobs.execute`); Hydra's ``-m`` runs a multirun.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from bench.harness.errors import ConfigError
from bench.harness.jobs import FAILED_JOBS, run_job
from bench.harness.overrides import (
    CONF_DIR,
    check_overrides,
    drop_empty_results_dir,
    require_writable_results_dir,
)


def _task_overrides() -> list[str]:
    try:
        return list(HydraConfig.get().overrides.task)
    except ValueError:
        return []


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> str:
    """Hydra-decorated job function (one call per job); returns ok, failed or skipped."""
    try:
        return run_job(cfg, _task_overrides())[0]
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    """Validate the command line, then hand it to Hydra."""
    argv = drop_empty_results_dir(sys.argv[1:] if argv is None else argv)
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    try:
        check_overrides(overrides)
        require_writable_results_dir(overrides)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *argv]
    hydra_main()
    if FAILED_JOBS:
        print(f"error: {len(FAILED_JOBS)} job(s) failed; their records hold the tracebacks: "
              f"{', '.join(FAILED_JOBS)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    raise SystemExit(main())
