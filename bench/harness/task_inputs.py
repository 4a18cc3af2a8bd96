"""What a task takes: the dataset classes and the method protocols an experiment's task can
run with.

A task function declares them with :func:`takes`; the job checks the composed config against
them before the task runs, so ``experiment=ssla/figure-1 method=la`` stops with one line
naming what the task needs and the methods that have it, instead of ending as a failed
record. A task names methods by protocol (a data family or a capability of
:mod:`bench.contracts`), never by class: a method class fits when it has the protocol's
members and, where the protocol's ``fit`` names the data it takes, its own ``fit`` annotates
that data (or a base of it). Python's ``issubclass`` refuses protocols with data members, so
the check here reads the members itself; the task then asks the built method with
:func:`capability`, and an optional capability with ``isinstance``.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from bench.harness.errors import ConfigError

P = TypeVar("P")


@dataclass(frozen=True)
class TaskInputs:
    """Classes a task accepts for ``cfg.dataset`` and protocols (or classes) for
    ``cfg.method``, any one of them (None: any or unused)."""

    datasets: tuple[type, ...] | None = None
    methods: tuple[type, ...] | None = None


def takes(*, datasets: tuple[type, ...] | None = None,
          methods: tuple[type, ...] | None = None) -> Callable:
    """Decorator recording on a task function which dataset classes and method protocols it
    runs."""

    def mark(task: Callable) -> Callable:
        task.inputs = TaskInputs(datasets, methods)
        return task

    return mark


def is_protocol(kind: type) -> bool:
    """Whether ``kind`` is a ``typing.Protocol`` class."""
    return bool(getattr(kind, "_is_protocol", False))


def protocol_members(protocol: type) -> list[str]:
    """Public members a protocol declares (annotations, methods, properties), its protocol
    bases' included."""
    members: dict[str, None] = {}
    for base in reversed(protocol.__mro__):
        if not is_protocol(base) or base is typing.Protocol or base is typing.Generic:
            continue
        for name in (*vars(base).get("__annotations__", {}), *vars(base)):
            if not name.startswith("_"):
                members[name] = None
    return list(members)


def has_member(cls: type, name: str) -> bool:
    """Whether instances of ``cls`` have ``name``: a class attribute, a property, or a field
    annotated on the class (a dataclass field without default)."""
    return hasattr(cls, name) or any(name in vars(base).get("__annotations__", {})
                                     for base in cls.__mro__)


def fit_data_type(function: Callable) -> Any:
    """The annotation of a ``fit``'s ``data`` parameter, resolved (None when absent or not
    resolvable)."""
    try:
        return typing.get_type_hints(function).get("data")
    except (NameError, TypeError):
        return None


def takes_data(taken: type, wanted: type) -> bool:
    """Whether a ``fit`` annotated with ``taken`` takes ``wanted`` data: ``wanted`` is
    ``taken`` or a subclass of it, or ``taken`` is a protocol whose members ``wanted`` has
    (a method that asks only for ``train_inputs`` and ``train_labels`` takes a TrainingSet)."""
    if is_protocol(taken):
        return all(has_member(wanted, name) for name in protocol_members(taken))
    return issubclass(wanted, taken)


def protocol_gap(cls: type, protocol: type) -> str | None:
    """Why ``cls`` does not follow ``protocol`` (None when it does): the members it lacks, or
    the data its ``fit`` takes when the protocol's ``fit`` names other data."""
    wanted = fit_data_type(protocol.fit) if hasattr(protocol, "fit") else None
    if isinstance(wanted, type) and wanted is not Any and hasattr(cls, "fit"):
        taken = fit_data_type(cls.fit)
        fits = isinstance(taken, type) and taken is not Any and takes_data(taken, wanted)
        if not fits:
            name = getattr(taken, "__name__", "undeclared data")
            return (f"it is not a {protocol.__name__} (its fit takes {name}, not "
                    f"{wanted.__name__})")
    missing = [name for name in protocol_members(protocol) if not has_member(cls, name)]
    if missing:
        return f"it is not a {protocol.__name__} (no {', '.join(missing)})"
    return None


def input_gap(cls: type, accepted: tuple[type, ...]) -> str | None:
    """Why ``cls`` fits none of ``accepted`` (protocols or classes); None when one fits."""
    gaps = []
    for kind in accepted:
        gap = (protocol_gap(cls, kind) if is_protocol(kind)
               else None if issubclass(cls, kind) else f"it is not a {kind.__name__}")
        if gap is None:
            return None
        gaps.append(gap)
    return "; ".join(gaps)


def fitting_options(group_dir: Path, accepted: tuple[type, ...]) -> list[str]:
    """Options of a config group (``conf/<group>/*.yaml``) whose ``_target_`` is accepted."""
    options = []
    for path in sorted(group_dir.glob("*.yaml")):
        target = OmegaConf.load(path).get("_target_")
        if target and input_gap(get_class(target), accepted) is None:
            options.append(path.stem)
    return options


def check_task_inputs(cfg: DictConfig, task: Callable, conf_dir: Path) -> None:
    """One-line ConfigError when ``cfg.dataset`` or ``cfg.method`` is not what the task
    takes, saying what it lacks and naming the group options that fit."""
    inputs = getattr(task, "inputs", None)
    if inputs is None:
        return
    for group, accepted in (("dataset", inputs.datasets), ("method", inputs.methods)):
        node = cfg.get(group)
        if accepted is None or node is None or "_target_" not in node:
            continue
        gap = input_gap(get_class(node._target_), accepted)
        if gap is not None:
            choices = ", ".join(fitting_options(conf_dir / group, accepted))
            raise ConfigError(f"{group}={node.get('name', node._target_)!r} does not fit "
                              f"experiment {cfg.name}: {gap}; choose one of: {choices}")


def capability(method: Any, protocol: type[P]) -> P:
    """``method`` as a ``protocol`` it follows, or a one-line ConfigError saying what it
    lacks. Checked on its class (:func:`protocol_gap`): ``isinstance`` would evaluate the
    properties of a method not yet fitted, which may refuse to answer."""
    gap = protocol_gap(type(method), protocol)
    if gap is not None:
        name = getattr(method, "name", type(method).__name__)
        raise ConfigError(f"method {name!r} does not fit this task: {gap}")
    return method
