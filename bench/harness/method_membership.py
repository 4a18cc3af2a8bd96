"""Which methods an experiment sweeps, declared by the methods themselves.

A method node names the experiments it belongs to in ``appears_in``
(``conf/method/<name>.yaml``: ``appears_in: [laplace_redux/table-3, ...]``). An experiment whose
``sweep.method`` is the word ``appears_in`` sweeps every method node that names it, in the
order of the node names (an experiment that loads another one's sweep, as Figure 9 loads
Table 3, sweeps the members of the one that declares it). So a new method for an existing
table is its class and its yaml; the experiment config is not edited. ``appears_in`` is data
for the sweep: it is not a constructor argument, and it is left out of the record's config
hash (:data:`bench.harness.records.NON_SEMANTIC_PATHS`), so listing a method in one more
experiment changes no record.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.harness.errors import ConfigError

MEMBERSHIP_KEY = "appears_in"
# The value of an experiment's ``sweep.method`` that asks for its members.
SWEEP_BY_MEMBERSHIP = MEMBERSHIP_KEY


def declared_memberships(conf_dir: Path) -> dict[str, list[str]]:
    """Method option -> the experiments its node lists in ``appears_in`` (every method node of
    ``conf_dir/method``; a node without the key belongs to none)."""
    memberships = {}
    for path in sorted((conf_dir / "method").glob("*.yaml")):
        listed = (yaml.safe_load(path.read_text()) or {}).get(MEMBERSHIP_KEY) or []
        if not isinstance(listed, list):
            raise ConfigError(f"method {path.stem!r}: {MEMBERSHIP_KEY}={listed!r} is not valid; "
                              "it must be a list of experiment names")
        memberships[path.stem] = [str(name) for name in listed]
    return memberships


def _experiment_file(experiment: str, conf_dir: Path) -> dict:
    path = conf_dir / "experiment" / f"{experiment}.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def sweeps_by_membership(experiment: str, conf_dir: Path) -> bool:
    """Whether the experiment's own file sweeps ``method: appears_in``."""
    sweep = _experiment_file(experiment, conf_dir).get("sweep") or {}
    return sweep.get("method") == SWEEP_BY_MEMBERSHIP


def sweep_owner(experiment: str, conf_dir: Path) -> str:
    """The experiment whose file declares the ``method: appears_in`` sweep that ``experiment``
    composes: itself, or the first experiment it loads in its defaults that does (Figure 9
    loads Table 3 and sweeps Table 3's methods); ``experiment`` itself when none does."""
    if sweeps_by_membership(experiment, conf_dir):
        return experiment
    for entry in _experiment_file(experiment, conf_dir).get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":
            owner = sweep_owner(entry, conf_dir)
            if sweeps_by_membership(owner, conf_dir):
                return owner
    return experiment


def methods_appearing_in(experiment: str, conf_dir: Path) -> list[str]:
    """The method options whose node lists the experiment (or the experiment it loads that
    declares the sweep, :func:`sweep_owner`) in ``appears_in``, sorted by name; a one-line
    ConfigError when none does."""
    owner = sweep_owner(experiment, conf_dir)
    members = [method for method, experiments in declared_memberships(conf_dir).items()
               if owner in experiments]
    if not members:
        raise ConfigError(f"experiment {experiment!r} sweeps method: {SWEEP_BY_MEMBERSHIP}, but "
                          f"no conf/method node lists it in {MEMBERSHIP_KEY}")
    return members


def unknown_memberships(conf_dir: Path) -> list[str]:
    """``'<method>: <experiment>'`` for each ``appears_in`` entry that names no experiment
    config, or an experiment whose sweep does not ask for its members."""
    return [f"{method}: {experiment}"
            for method, experiments in declared_memberships(conf_dir).items()
            for experiment in experiments if not sweeps_by_membership(experiment, conf_dir)]


def is_side_run(experiment: str, conf_dir: Path) -> bool:
    """Whether ``experiment`` is a side-run config: its ``name`` is another experiment's (its
    records join that experiment's, README 'Running experiments')."""
    name = _experiment_file(experiment, conf_dir).get("name")
    return isinstance(name, str) and name != experiment


def check_side_run_method(experiment: str, methods: list[str], conf_dir: Path) -> None:
    """A one-line ConfigError when a side-run config that sweeps its members is given a
    method it does not vary (its records would duplicate the main experiment's jobs under
    another hash)."""
    if not (is_side_run(experiment, conf_dir) and sweeps_by_membership(experiment, conf_dir)):
        return
    members = methods_appearing_in(experiment, conf_dir)
    for method in methods:
        if method not in members:
            raise ConfigError(f"method={method} is not valid for experiment={experiment}: a "
                              f"side run varies only {', '.join(members)}")
