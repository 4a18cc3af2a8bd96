"""Optuna storage, study and trial loop for ``python -m bench.tune``.

A study lives in persistent storage and is created with ``load_if_exists=True``, so several
workers can share it and a rerun continues it. ``trials`` is the total number of finished
trials (complete, failed or pruned) the study should hold: each call runs only the remainder,
and every worker stops once the shared total is reached (a worker that is mid-trial then still
finishes its trial, so the total can be exceeded by at most workers - 1).

Each worker of a study needs its own ``worker`` index (the sampler's seed derives from it): a
worker holds a lock file for its index beside a file-based storage while its process lives,
and a second worker given the same index is refused with one line.
"""

from __future__ import annotations

import datetime
import fcntl
import importlib
import json
import math
import os
import re
import socket
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

from bench.harness.errors import ConfigError
from bench.harness.rng import derived_seed
from bench.tuning.space import suggest, to_fields

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")
_TRACEBACK_CHARS = 4000
# Worker locks this process holds (lock file -> open descriptor); the OS releases them when
# the process ends, killed or not.
_CLAIMS: dict[str, int] = {}


class TrialFailed(RuntimeError):
    """The objective raised or returned NaN/inf; the trial is FAILED and the study goes on."""


def storage_kind(spec: str) -> str:
    """``"rdb"`` (a URL), ``"sqlite"`` or ``"journal"`` (a file path), else a ConfigError."""
    if "://" in spec:
        return "rdb"
    suffix = Path(spec).suffix
    if suffix in SQLITE_SUFFIXES:
        return "sqlite"
    if suffix in JOURNAL_SUFFIXES:
        return "journal"
    endings = ", ".join(SQLITE_SUFFIXES + JOURNAL_SUFFIXES)
    raise ConfigError(f"storage={spec!r} is not valid; give an RDB URL (sqlite:///x.db, "
                      f"postgresql://...) or a file ending in one of: {endings}")


def open_storage(spec: str) -> str | optuna.storages.BaseStorage:
    """The Optuna storage for ``spec``; creates the folder of a file-based storage."""
    kind = storage_kind(spec)
    if kind == "rdb":
        if spec.startswith("sqlite:///"):
            Path(spec.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return spec
    path = Path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        return f"sqlite:///{path}"
    return JournalStorage(JournalFileBackend(str(path)))


def describe_storage(spec: str) -> str:
    """``spec`` with any password in a URL masked, for logs and file headers."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", spec)


def claim_path(storage: str, name: str, worker: int) -> Path | None:
    """The lock file of worker index ``worker`` of study ``name``: beside a SQLite or journal
    storage file, None for a server database or an in-memory one (no folder every worker
    sees)."""
    kind = storage_kind(storage)
    if kind == "rdb" and not storage.startswith("sqlite:///"):
        return None
    path = Path(storage.removeprefix("sqlite:///"))
    if path.name in ("", ":memory:"):
        return None
    study = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return path.with_name(f".{path.name}.{study}.worker-{worker}.lock")


def claim_worker(storage: str, name: str, worker: int) -> None:
    """Hold the lock of worker index ``worker`` of study ``name`` for the rest of this process.

    Two workers with one index seed their samplers alike and propose the same parameters, so a
    ConfigError (one line, naming the holder) refuses the second while the first one's process
    lives. Where the file system cannot lock, a one-line warning says the index is unchecked.
    """
    path = claim_path(storage, name, worker)
    if path is None or str(path) in _CLAIMS:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise ConfigError(f"worker={worker} of study={name!r} in {describe_storage(storage)} is "
                          f"already running ({holder}); give each worker of a study its own "
                          f"index, e.g. worker={worker + 1}: two with one index propose the same "
                          "parameters") from None
    except OSError as err:
        os.close(fd)
        print(f"warning: cannot lock {path} ({err.strerror}); worker={worker} is not checked "
              "against another worker with the same index", file=sys.stderr)
        return
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode())
    _CLAIMS[str(path)] = fd


@contextmanager
def creation_lock(storage: str) -> Iterator[None]:
    """Hold an exclusive lock beside a SQLite storage file while a study is created or
    loaded: workers that start together on a new file would otherwise both create its
    tables, and one dies on 'table study_directions already exists'. Nothing to lock for a
    server database or a journal file (Optuna serialises those itself)."""
    if storage_kind(storage) == "journal" or (storage_kind(storage) == "rdb"
                                              and not storage.startswith("sqlite:///")):
        yield
        return
    path = Path(storage.removeprefix("sqlite:///"))
    if path.name in ("", ":memory:"):
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.create.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load_study(name: str, storage: str, seed: int, worker: int, direction: str,
               settings: Mapping[str, Any]) -> optuna.Study:
    """Create or load study ``name``, sampling with TPE seeded from ``seed``.

    ``settings`` (space, search parameters, objective, seed) is stored with a new study; loading
    a study that was run with other settings raises a ConfigError, so two different searches
    never mix their trials under one name. See :func:`sampler_seed` for the sampler's seed;
    :func:`claim_worker` refuses a second live worker with the same ``worker`` index.
    """
    claim_worker(storage, name, worker)
    settings = json.loads(json.dumps(settings))
    with creation_lock(storage):
        study = optuna.create_study(storage=open_storage(storage), study_name=name,
                                    direction=direction, load_if_exists=True)
    stored = study.user_attrs.get("settings")
    if stored is None:
        study.set_user_attr("settings", settings)
    elif stored != settings:
        old, new = _flatten(stored), _flatten(settings)
        differing = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        raise ConfigError(f"study={name!r} in {describe_storage(storage)} was run with other "
                          f"{', '.join(differing)}; use its settings or another study= name")
    seed = sampler_seed(seed, worker, len(study.get_trials(deepcopy=False)))
    study.sampler = optuna.samplers.TPESampler(seed=seed)
    return study


def sampler_seed(seed: int, worker: int, n_trials: int) -> int:
    """TPE seed of ``worker`` joining a study that already holds ``n_trials`` trials.

    A new study's first worker samples with ``seed`` itself. Any other worker, or a rerun that
    continues a study, gets a seed derived from all three numbers: a sampler restarted with the
    same seed would propose the same random start-up points again.
    """
    if worker == 0 and n_trials == 0:
        return seed
    return derived_seed([seed, worker, n_trials])


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def resolve_target(target: str) -> Callable[..., Any]:
    """The objective function named by the dotted path ``target`` (``package.module.name``)."""
    module_name, _, name = str(target).rpartition(".")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ConfigError(f"objective.target={target!r} cannot be imported: "
                          f"{type(err).__name__}: {err}") from None
    if not callable(function):
        raise ConfigError(f"objective.target={target!r} is not a function")
    return function


def trial_objective(function: Callable[..., Any], params: Mapping[str, Mapping[str, Any]],
                    seed: int, options: Mapping[str, Any]) -> Callable[[optuna.Trial], float]:
    """Wrap ``function(fields, seed, **options) -> float`` as an Optuna objective.

    An exception or a non-finite value becomes :class:`TrialFailed` with the message kept in the
    trial's user attrs ``error`` (and ``traceback``). A ConfigError or ImportError is a set-up
    mistake that every trial would repeat, so it stops the study instead.
    """

    def objective(trial: optuna.Trial) -> float:
        trial.set_user_attr("worker", {"host": socket.gethostname(), "pid": os.getpid()})
        fields = to_fields(params, suggest(trial, params))
        try:
            value = float(function(fields, seed, **options))
        except (ConfigError, ImportError) as err:
            trial.set_user_attr("error", f"{type(err).__name__}: {err}")
            raise
        except Exception as err:
            message = f"{type(err).__name__}: {err}"
            trial.set_user_attr("error", message)
            trial.set_user_attr("traceback", traceback.format_exc()[-_TRACEBACK_CHARS:])
            raise TrialFailed(message) from err
        if not math.isfinite(value):
            message = f"objective returned {value}"
            trial.set_user_attr("error", message)
            raise TrialFailed(message)
        return value

    return objective


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale(trial: optuna.trial.FrozenTrial, stale_after_s: float) -> bool:
    """Whether a RUNNING trial's worker is gone: its process on this host no longer exists,
    or (another host) the trial started more than ``stale_after_s`` seconds ago."""
    worker = trial.user_attrs.get("worker") or {}
    if worker.get("host") == socket.gethostname() and isinstance(worker.get("pid"), int):
        return not _process_alive(worker["pid"])
    started = trial.datetime_start
    if started is None:
        return True
    age = datetime.datetime.now() - started
    return age.total_seconds() > stale_after_s


def fail_stale_trials(study: optuna.Study, stale_after_s: float) -> list[int]:
    """Mark the RUNNING trials of killed workers FAILED (their number is returned)."""
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if is_stale(trial, stale_after_s):
            study._storage.set_trial_user_attr(trial._trial_id, "error",
                                               "its worker stopped mid-trial")
            study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
            failed.append(trial.number)
    return failed


def finished_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Trials that are complete, failed or pruned (running ones are not counted)."""
    return study.get_trials(deepcopy=False, states=FINISHED)


def run_remaining(study: optuna.Study, objective: Callable[[optuna.Trial], float],
                  total: int) -> int:
    """Run trials until the study holds ``total`` finished ones; returns how many ran here."""
    remaining = total - len(finished_trials(study))
    if remaining <= 0:
        return 0
    ran: list[int] = []
    study.optimize(
        objective, n_trials=remaining, catch=(TrialFailed,),
        callbacks=[lambda _study, trial: ran.append(trial.number),
                   MaxTrialsCallback(total, states=FINISHED)],
    )
    return len(ran)


def summarize(study: optuna.Study) -> dict[str, Any]:
    """Counts per state and, when a trial completed, the best value, trial number and params."""
    trials = study.get_trials(deepcopy=False)
    counts = {state.name.lower(): sum(t.state == state for t in trials) for state in TrialState}
    summary: dict[str, Any] = {"study": study.study_name, "counts": counts,
                               "finished": len(finished_trials(study))}
    if counts["complete"]:
        best = study.best_trial
        summary.update(best_value=best.value, best_trial=best.number, best_params=best.params)
    return summary
