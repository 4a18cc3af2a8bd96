"""The best trial of a study as a conf/tuned/<scale>/<space>.yaml file.

The file holds method field names (the ``field`` of each search parameter) so a config can merge
it onto a method, under a header saying where the values came from. It is written atomically
and an existing file is only replaced with ``overwrite=true``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
import yaml

from bench.harness.errors import ConfigError
from bench.harness.provenance import git_state
from bench.tuning.space import to_fields
from bench.tuning.study import describe_storage


class NothingToExport(RuntimeError):
    """The study has no completed trial, so there is no best trial to export."""


def refuse_existing(path: Path, overwrite: bool) -> None:
    """Raise a one-line ConfigError if ``path`` exists and ``overwrite`` is off."""
    if Path(path).exists() and not overwrite:
        raise ConfigError(f"export={str(path)!r} already exists; set overwrite=true to replace "
                          f"it or choose another export= path")


def write_text_atomically(path: Path, text: str, overwrite: bool) -> Path:
    """Write ``text`` to ``path`` via a flushed temporary file in the same folder.

    Without ``overwrite`` the temporary file is hard-linked to ``path``, which fails if ``path``
    exists (even when another process created it meanwhile); with it, it is renamed over it.
    Readers never see half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                refuse_existing(path, overwrite=False)  # the one-line error, if still there
                raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def tuned_yaml(study: optuna.Study, params: Mapping[str, Mapping[str, Any]], space: str,
               storage: str, seed: int) -> str:
    """YAML text of the best trial's method fields, under a provenance header."""
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        raise NothingToExport(f"study {study.study_name!r} has no completed trial to export")
    best = study.best_trial
    fields = to_fields(params, best.params)
    git = git_state()
    sha = f"{git['git_sha']}{' (uncommitted changes)' if git['git_dirty'] else ''}"
    lines = [
        f"# Tuned by `python -m bench.tune space={space}` (Optuna TPE, seed {seed}).",
        f"# study: {study.study_name}",
        f"# storage: {describe_storage(storage)}",
        f"# completed trials: {len(complete)} of {len(study.get_trials(deepcopy=False))}",
        f"# best value: {best.value!r} (trial {best.number}, {study.direction.name.lower()})",
        f"# date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"# git sha: {sha}",
    ]
    if fields != best.params:
        searched = ", ".join(f"{name}={value!r}" for name, value in best.params.items())
        lines.append(f"# searched values: {searched}")
    body = yaml.safe_dump(fields, sort_keys=False, default_flow_style=False)
    return "".join(line.replace("\n", " ") + "\n" for line in lines) + body
