"""Check that a change of config spelling keeps every record's folder (its config hash).

``python -m tests.record_hashes --results DIR EXPERIMENT ...`` checks, per experiment:

- the jobs: every job of the experiment's declared sweep and side runs, at each ``--scales``,
  is composed with the code of this checkout and hashed as a job hashes itself
  (:func:`bench.harness.finished_jobs.job_identity`). ``--save FILE`` writes the hashes, and
  ``--compare FILE`` reports every job whose hash differs from the one saved there: save with
  the code before the change (``PYTHONPATH=<old checkout> python <this file> ... --save``),
  compare with the code after it;
- the records (``DIR/<experiment>/<scale>/*/record.json``, at the first scale): how many a
  composed job names; and that each record's own config hashes to its folder name both as
  stored and respelled with the ``conf/model`` node (:func:`model_node_spelling`).

Exit status 1 when a job's hash moved or a record's config does not hash to its folder.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser

from bench.cli.reproduce_command import sweep_overrides
from bench.harness.errors import ConfigError
from bench.harness.finished_jobs import job_identity
from bench.harness.records import RECORD_NAME, config_hash
from bench.reporting.registry import side_run_configs
from tests.helpers import REPO, compose_config


def expanded_jobs(multirun: list[str]) -> list[list[str]]:
    """The overrides of every job of one multirun (the product of its sweeps)."""
    parsed = OverridesParser.create().parse_overrides(multirun)
    choices = []
    for item, text in zip(parsed, multirun, strict=True):
        key, _, value = text.partition("=")
        values = list(item.sweep_string_iterator()) if item.is_sweep_override() else [value]
        choices.append([f"{key}={one}" for one in values])
    return [list(job) for job in itertools.product(*choices)]


def composed_job_hashes(experiment: str, scale: str) -> dict[str, str]:
    """Overrides (one line) -> config hash of every job ``python -m bench.reproduce
    <experiment> --scale <scale>`` runs (side runs included); a sweep that does not compose is
    one entry ``"(sweep of <experiment>)"`` holding its one-line ConfigError."""
    hashes = {}
    for swept in (experiment, *side_run_configs(experiment)):
        try:
            multiruns = sweep_overrides(swept, scale, [])
        except ConfigError as err:
            hashes[f"(sweep of {swept})"] = f"ConfigError: {err}"
            continue
        hashes |= {" ".join(job): job_hash(job)
                   for multirun in multiruns for job in expanded_jobs(multirun)}
    return hashes


def job_hash(overrides: list[str]) -> str:
    """The config hash of the job ``overrides`` compose to, or the first line of the error
    composing it raised (a tuned-hyperparameter file this checkout lacks), the checkout's
    folder written ``<repo>``."""
    try:
        return job_identity(compose_config(overrides), overrides).config_hash
    except Exception as err:  # noqa: BLE001 - Hydra and OmegaConf raise their own errors
        return f"{type(err).__name__}: {str(err).splitlines()[0]}".replace(str(REPO), "<repo>")


def stored_records(results: Path, experiment: str, scale: str) -> dict[str, dict]:
    """Folder name -> record of every record of ``experiment`` at ``scale`` under ``results``."""
    return {path.parent.name: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted((results / experiment / scale).glob(f"*/{RECORD_NAME}"))}


def model_node_spelling(config: Any) -> Any:
    """``config`` with every training recipe's network written as the ``conf/model`` node
    (``model: {name, options}``, ``model_options`` dropped; no options: ``{}``), as the
    experiments spell it now."""
    if isinstance(config, list):
        return [model_node_spelling(item) for item in config]
    if not isinstance(config, dict):
        return config
    spelled = {key: model_node_spelling(value) for key, value in config.items()}
    if "stages" in spelled and isinstance(spelled.get("model"), str):
        options = spelled.pop("model_options", {})
        spelled["model"] = {"name": spelled["model"], "options": copy.deepcopy(options)}
    return spelled


def record_problems(records: dict[str, dict]) -> list[str]:
    """One line per record whose config, as stored or respelled, does not hash to its folder."""
    problems = []
    for folder, record in records.items():
        for spelling, config in (("stored", record["config"]),
                                 ("model node", model_node_spelling(record["config"]))):
            if config_hash(config) != folder:
                problems.append(f"{folder}: its {spelling} config hashes to "
                                f"{config_hash(config)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Print the checks of each experiment (module docstring); the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tests.record_hashes", description=__doc__)
    parser.add_argument("experiments", nargs="+")
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--scales", default="cpu", help="comma-separated; records: the first")
    parser.add_argument("--save", type=Path, help="write the composed jobs' hashes here")
    parser.add_argument("--compare", type=Path, help="compare them with the hashes saved here")
    args = parser.parse_args(argv)
    scales = args.scales.split(",")
    saved = json.loads(args.compare.read_text()) if args.compare else None
    composed: dict[str, dict[str, str]] = {}
    failures = 0
    for experiment in args.experiments:
        jobs = {f"{scale} {line}": chash for scale in scales
                for line, chash in composed_job_hashes(experiment, scale).items()}
        composed[experiment] = jobs
        records = stored_records(args.results, experiment, scales[0])
        named = [folder for folder in records if folder in set(jobs.values())]
        problems = record_problems(records)
        print(f"{experiment}: {len(jobs)} jobs composed at {args.scales}; {scales[0]}: "
              f"{len(records)} records, {len(records) * 2 - len(problems)} of "
              f"{len(records) * 2} record configs (stored, model node) hash to their folder, "
              f"{len(named)} records named by a composed job")
        if saved is not None:
            before = saved.get(experiment, {})
            moved = [line for line in jobs if before.get(line) != jobs[line]]
            gone = [line for line in before if line not in jobs]
            print(f"  vs saved: {len(jobs) - len(moved)} of {len(jobs)} jobs keep their hash, "
                  f"{len(gone)} saved jobs not composed now")
            problems += [f"job hash moved: {line}" for line in moved + gone]
        for line in problems:
            print(f"  {line}")
        failures += len(problems)
    if args.save:
        args.save.write_text(json.dumps(composed, indent=1, sort_keys=True), encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
