"""The artifact registry: which paper artifacts are implemented, derived, never listed by hand.

An artifact ``<paper>/<artifact>`` is implemented when it has a report spec (any module in
``bench/reporting/specs/``) and the experiment config its records come from exists
(``conf/experiment/<spec.experiment>.yaml``; usually ``<paper>/<artifact>``, but a figure
drawn from a table's records names that table's experiment). An experiment config may also
hold side runs of another experiment: its ``name`` is that experiment's, so its records join
that results folder and that experiment's spec reads them. The make targets, the report
index and ``python -m bench.cli.artifacts`` all read this module.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

import yaml

from bench.harness.overrides import CONF_DIR, group_options
from bench.reporting.spec import ArtifactSpec
from bench.reporting.specs import SPECS


def natural_key(key: str) -> list:
    """Sort key that orders ``table-2`` before ``table-10`` (digit runs compare as numbers)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key)]


def experiment_configs() -> list[str]:
    """Every experiment config, as ``<paper>/<artifact>`` (``conf/experiment/**.yaml``)."""
    return sorted(group_options().get("experiment", []), key=natural_key)


def experiment_file(experiment: str) -> dict:
    """The top-level keys ``conf/experiment/<experiment>.yaml`` itself sets (not composed:
    what it loads is not merged in); {} when there is no such file."""
    path = CONF_DIR / "experiment" / f"{experiment}.yaml"
    if not path.exists():
        return {}
    return copy.deepcopy(_parsed_yaml(str(path), path.stat().st_mtime_ns))


@functools.cache
def _parsed_yaml(path: str, modified_ns: int) -> dict:
    """The YAML file at ``path`` as of ``modified_ns``: parsed once per version, since every
    ``side_run_configs`` call reads every experiment's ``name`` (a thousand parses otherwise)."""
    return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}


def results_experiment(experiment: str) -> str:
    """The experiment whose results folder ``experiment``'s records go to: the ``name`` its
    config sets (a side-run config names the experiment it adds records to), else its own."""
    name = experiment_file(experiment).get("name")
    return str(name) if name else experiment


def side_run_configs(experiment: str) -> list[str]:
    """The other experiment configs whose records join ``experiment``'s folder (side runs that
    its report quotes), in natural order."""
    return [name for name in experiment_configs()
            if name != experiment and results_experiment(name) == experiment]


def implemented_artifacts() -> dict[str, ArtifactSpec]:
    """Specs whose experiment config exists, keyed by ``<paper>/<artifact>``, in natural order."""
    configs = set(experiment_configs())
    return {key: SPECS[key] for key in sorted(SPECS, key=natural_key)
            if SPECS[key].experiment in configs}


def specs_reading(experiment: str) -> list[ArtifactSpec]:
    """The specs rendered from ``experiment``'s records (its own spec first)."""
    specs = [spec for spec in SPECS.values() if spec.experiment == experiment]
    return sorted(specs, key=lambda spec: (spec.key != experiment, natural_key(spec.key)))


def registry_problems() -> list[str]:
    """One line per inconsistency: a config no spec reads, a spec without its config, or an
    implemented artifact missing from the catalog (``bench/reporting/catalog.py``)."""
    from bench.reporting.catalog import catalog_entry

    configs = experiment_configs()
    read = {spec.experiment for spec in SPECS.values()}
    problems = [f"conf/experiment/{name}.yaml has no report spec in bench/reporting/specs/"
                for name in configs if results_experiment(name) not in read]
    problems += [f"report spec {key} reads experiment {spec.experiment!r}, which has no "
                 f"conf/experiment/{spec.experiment}.yaml"
                 for key, spec in SPECS.items() if spec.experiment not in configs]
    problems += [f"{key} is not in the catalog (bench/reporting/catalog.py)"
                 for key in implemented_artifacts() if catalog_entry(key) is None]
    return problems
