"""What a task takes: the dataset and method classes an experiment's task can run with.

A task function declares them with :func:`takes`; the job checks the composed config against
them before the task runs, so ``experiment=ssla/figure-1 method=la`` stops with one line
naming the methods that fit instead of ending as a failed record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from bench.harness.errors import ConfigError


@dataclass(frozen=True)
class TaskInputs:
    """Classes a task accepts for ``cfg.dataset`` and ``cfg.method`` (None: any or unused)."""

    datasets: tuple[type, ...] | None = None
    methods: tuple[type, ...] | None = None


def takes(*, datasets: tuple[type, ...] | None = None,
          methods: tuple[type, ...] | None = None) -> Callable:
    """Decorator recording on a task function which dataset and method classes it runs."""

    def mark(task: Callable) -> Callable:
        task.inputs = TaskInputs(datasets, methods)
        return task

    return mark


def fitting_options(group_dir: Path, accepted: tuple[type, ...]) -> list[str]:
    """Options of a config group (``conf/<group>/*.yaml``) whose ``_target_`` is accepted."""
    options = []
    for path in sorted(group_dir.glob("*.yaml")):
        target = OmegaConf.load(path).get("_target_")
        if target and issubclass(get_class(target), accepted):
            options.append(path.stem)
    return options


def check_task_inputs(cfg: DictConfig, task: Callable, conf_dir: Path) -> None:
    """One-line ConfigError when ``cfg.dataset`` or ``cfg.method`` is not a class the task
    takes, naming the group options that are."""
    inputs = getattr(task, "inputs", None)
    if inputs is None:
        return
    for group, accepted in (("dataset", inputs.datasets), ("method", inputs.methods)):
        node = cfg.get(group)
        if accepted is None or node is None or "_target_" not in node:
            continue
        if not issubclass(get_class(node._target_), accepted):
            choices = ", ".join(fitting_options(conf_dir / group, accepted))
            raise ConfigError(f"{group}={node.get('name', node._target_)!r} does not fit "
                              f"experiment {cfg.name}; choose one of: {choices}")
