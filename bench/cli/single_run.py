"""One job from a command line without Hydra flags, run by Hydra's own ``Hydra.run``.

``hydra.main`` composes the whole config once more before every command line only to read
``hydra.mode`` (none of our configs sets it), then runs a command line without ``-m`` in RUN
mode with ``hydra.mode=RUN`` added. :func:`run_single` does the same run without that probe:
the job, its config, its run folder, logging and callbacks are Hydra's, and a start-up is one
composition shorter (``make bench-perf``'s start-up benchmark measures it). Command lines with
flags (``-m``, ``--cfg``, ``--info``, ...) still go through ``hydra.main``.
"""

from __future__ import annotations

from collections.abc import Callable

from hydra import version
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path, run_and_report
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from bench.harness.overrides import CONF_DIR

VERSION_BASE = "1.3"
# hydra.main names the task after the file that defines the job function.
TASK_NAME = "run_command"


def run_single(overrides: list[str], job: Callable[[DictConfig], object]) -> None:
    """Run ``job`` once on the root config with ``overrides`` in Hydra's RUN mode."""
    version.setbase(VERSION_BASE)
    app = Hydra.create_main_hydra2(task_name=TASK_NAME,
                                   config_search_path=create_config_search_path(str(CONF_DIR)))
    try:
        run_and_report(lambda: app.run(config_name="config", task_function=job,
                                       overrides=[*overrides, "hydra.mode=RUN"]))
    finally:
        GlobalHydra.instance().clear()
