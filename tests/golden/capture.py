"""Store (or check) golden cells: what every experiment's jobs produce at a given scale.

``python -m tests.golden.capture --scale smoke`` runs every job of every experiment config
in-process (the jobs ``bench.cli.reproduce_command`` would launch) and writes their cells,
metrics and a fingerprint of their figure arrays to
``tests/golden/<scale>/<paper>__<artifact>.json``. The regression test
(``tests/integration/test_golden_cells.py``) re-runs the jobs and compares them to a relative
tolerance of ``RELATIVE_TOLERANCE`` (``assert_matches_golden``), so code that moves cannot
change a number unnoticed, while the last-digit differences that the same float program shows
on another CPU (other vector units sum in another order) pass.

Jobs whose training amplifies those last digits past the tolerance hold a second entry per
machine arithmetic (:mod:`tests.golden.arithmetic`):
``python -m tests.golden.capture --arithmetic <experiment>...`` runs the jobs on this machine
and stores, under ``tests/golden/<scale>/arithmetic/<name>/``, only the entries that differ
from the reference goldens; the regression test compares each job with the entry of its
machine's arithmetic where there is one. Capturing the reference goldens of an experiment
again removes its per-arithmetic entries (they belonged to the code before).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser

GOLDEN_DIR = Path(__file__).resolve().parent
# Per machine arithmetic entries: tests/golden/<scale>/<ARITHMETIC_DIR>/<arithmetic name>/.
ARITHMETIC_DIR = "arithmetic"
# Two CPUs running the same float program agree to ~1e-13 relative, and to ~1e-5 after a
# thousand steps of stochastic training (VI) amplify it; a real change moves numbers by more.
# Trainings that amplify it further hold entries per machine arithmetic (module docstring).
RELATIVE_TOLERANCE = 1e-4
ABSOLUTE_TOLERANCE = 1e-10
# Experiments that read data files: their goldens hold the data root's origins
# (``DATA_ORIGINS_KEY``) and are checked only on a root of the same origins (the shared files
# linked, or the same generated ones). The others generate their data from the seed.
READS_DATA_FILES = ("ssla/table-3", "ssla/table-4", "generalized_laplace/figure-3",
                    "generalized_laplace/figure-4", "ggn_thesis/figure-5.6")
READS_DATA_PREFIXES = ("laplace_redux/",)
DATA_ORIGINS_KEY = "_data_origins"
# Cells that hold seconds (Laplace Redux Table 2's prediction time, Figure 8's fit and
# prediction times): their presence is golden, their value is the machine's.
TIMING_COLUMNS = ("pred_time", "fit_s", "predict_s")
TIMED = "timed"
# Experiments cheap enough at cpu scale to keep cpu-scale goldens of.
CHEAP_AT_CPU = ("ssla/blr", "ssla/table-1", "ssla/table-5", "ssla/table-6", "ssla/table-7",
                "ssla/table-8", "ssla/figure-1", "ssla/figure-3")


def reads_data_files(experiment: str) -> bool:
    """Whether ``experiment`` reads data files (rather than generating its data)."""
    return experiment in READS_DATA_FILES or experiment.startswith(READS_DATA_PREFIXES)


def golden_data_root(folder: Path):
    """The data root goldens run on: the shared data's files linked where present, generated
    files in the real formats for the rest (``tests/gpu/data_root.py``)."""
    from tests.gpu.data_root import build_data_root
    from tests.helpers import SHARED_DATA

    return build_data_root(folder, SHARED_DATA if SHARED_DATA.is_dir() else None)


def comparable_origins(origins: dict[str, str]) -> dict[str, str]:
    """Origins without the source folder (``linked`` or ``generated``), so goldens captured
    beside one checkout compare with a root built beside another."""
    return {name: origin.split(" ")[0] for name, origin in origins.items()}


def experiments() -> list[str]:
    """Every experiment config, as ``<paper>/<artifact>``."""
    from bench.harness.overrides import group_options

    return sorted(group_options()["experiment"])


def expand_jobs(multirun: list[str]) -> list[list[str]]:
    """One override list per job of a Hydra multirun override list (cartesian product)."""
    parser = OverridesParser.create()
    choices = []
    for text, override in zip(multirun, parser.parse_overrides(multirun), strict=True):
        if override.is_sweep_override():
            key = override.get_key_element()
            choices.append([f"{key}={v}" for v in override.sweep_string_iterator()])
        else:
            choices.append([text])
    return [list(job) for job in itertools.product(*choices)]


def job_key(job: list[str]) -> str:
    """Stable name of a job: its overrides, sorted."""
    return " ".join(sorted(job))


def arrays_fingerprint(arrays) -> dict:
    """Per array of a record's figure arrays: [length, non-finite count, sum, sum of |x|, min, max].

    Arrays are the numeric lists found at any depth, keyed by their ``/``-joined path; ``None``
    stands for a non-finite value. Summaries, unlike a digest of the exact floats, can be
    compared to a tolerance."""
    found: dict = {}

    def walk(value, path: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}/{key}")
        elif isinstance(value, list) and any(isinstance(v, list | dict) for v in value):
            for index, item in enumerate(value):
                walk(item, f"{path}/{index}")
        elif isinstance(value, list):
            finite = [float(v) for v in value
                      if isinstance(v, int | float) and math.isfinite(v)]
            found[path] = [len(value), len(value) - len(finite), math.fsum(finite),
                           math.fsum(abs(v) for v in finite),
                           min(finite, default=None), max(finite, default=None)]
        else:
            found[path] = value

    walk(arrays, "")
    return found


def mismatches(got, expected, path: str = "") -> list[str]:
    """Where ``got`` differs from ``expected`` beyond the golden tolerance (empty: they match).

    Numbers compare to ``RELATIVE_TOLERANCE`` / ``ABSOLUTE_TOLERANCE``; everything else
    (strings, ``None``, lengths, keys) exactly."""
    if isinstance(expected, dict) and isinstance(got, dict):
        if set(got) != set(expected):
            return [f"{path}: keys {sorted(set(got) ^ set(expected))} differ"]
        return [m for key in expected for m in mismatches(got[key], expected[key], f"{path}/{key}")]
    if isinstance(expected, list) and isinstance(got, list):
        if len(got) != len(expected):
            return [f"{path}: length {len(got)} != {len(expected)}"]
        return [m for i, (g, e) in enumerate(zip(got, expected, strict=True))
                for m in mismatches(g, e, f"{path}/{i}")]
    numbers = (int, float)
    if (isinstance(got, numbers) and isinstance(expected, numbers)
            and not isinstance(got, bool) and not isinstance(expected, bool)):
        if math.isclose(got, expected, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE):
            return []
        return [f"{path}: {got!r} != {expected!r}"]
    same = type(got) is type(expected) and got == expected
    return [] if same else [f"{path}: {got!r} != {expected!r}"]


def run_job(job: list[str], with_record: bool = False):
    """Run one job in-process (into ``$BENCH_RESULTS_DIR``); its golden entry (and record).

    Torch runs on one thread, as at capture, so reductions sum in the same order."""
    import torch

    from bench.harness.jobs import execute
    from tests.helpers import compose_config

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        record = execute(compose_config(job), job)
    finally:
        torch.set_num_threads(threads)
    entry = {
        "status": record["status"],
        "cells": [[c["row"], c["column"],
                   TIMED if c["column"] in TIMING_COLUMNS else c["value"]]
                  for c in record["cells"]],
        "metrics": record["metrics"],
        "arrays": arrays_fingerprint(record["arrays"]),
    }
    return (entry, record) if with_record else entry


def capture(experiment: str, scale: str) -> dict:
    """Golden entries of every job of ``experiment`` at ``scale``."""
    from bench.cli.reproduce_command import sweep_overrides

    entries = {}
    for multirun in sweep_overrides(experiment, scale, []):
        for job in expand_jobs(multirun):
            t0 = time.perf_counter()
            entries[job_key(job)] = run_job(job)
            print(f"  {job_key(job)}: {time.perf_counter() - t0:.1f}s", flush=True)
    return entries


def golden_path(experiment: str, scale: str, arithmetic: str | None = None) -> Path:
    """Where the goldens of one experiment at one scale live: the reference ones, or with
    ``arithmetic`` the entries of that machine arithmetic."""
    folder = GOLDEN_DIR / scale
    if arithmetic is not None:
        folder = folder / ARITHMETIC_DIR / arithmetic
    return folder / (experiment.replace("/", "__") + ".json")


def entry_mismatches(got: dict, expected: dict) -> list[str]:
    """Where a job's golden entry differs from a stored one (status, cells, metrics, arrays)."""
    return [m for part in ("status", "cells", "metrics", "arrays")
            for m in mismatches(got[part], expected[part], part)]


def differing_entries(entries: dict, reference: dict) -> dict:
    """The entries that differ from ``reference`` beyond the golden tolerance (with the data
    origins, where held). Every job must have a reference entry, captured from data of the
    same origins: a ValueError says which does not."""
    missing = sorted(key for key in entries if key not in reference)
    if missing:
        raise ValueError(f"no reference golden for {missing}: capture the reference first")
    if entries.get(DATA_ORIGINS_KEY) != reference.get(DATA_ORIGINS_KEY):
        raise ValueError(f"the reference goldens were captured from data of other origins "
                         f"({reference.get(DATA_ORIGINS_KEY)}; here "
                         f"{entries.get(DATA_ORIGINS_KEY)})")
    differ = {key: entry for key, entry in entries.items()
              if key != DATA_ORIGINS_KEY and entry_mismatches(entry, reference[key])}
    if differ and DATA_ORIGINS_KEY in entries:
        differ[DATA_ORIGINS_KEY] = entries[DATA_ORIGINS_KEY]
    return differ


def store_entries(experiment: str, scale: str, entries: dict, this_machine: bool) -> Path:
    """Write ``entries`` as the reference goldens of ``experiment`` (removing every
    per-arithmetic file of it), or with ``this_machine`` as this machine arithmetic's entries
    (only those differing from the reference, which must exist; no file when none does)."""
    from tests.golden.arithmetic import arithmetic_name

    reference_path = golden_path(experiment, scale)
    if not this_machine:
        for stale in (GOLDEN_DIR / scale / ARITHMETIC_DIR).glob(f"*/{reference_path.name}"):
            _remove_file(stale)
        return _write_entries(reference_path, entries)
    if not reference_path.exists():
        raise ValueError(f"no reference goldens at {reference_path}: capture them first")
    path = golden_path(experiment, scale, arithmetic_name())
    entries = differing_entries(entries, json.loads(reference_path.read_text()))
    if not entries:
        _remove_file(path)
        return path
    return _write_entries(path, entries)


def _write_entries(path: Path, entries: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    return path


def _remove_file(path: Path) -> None:
    """Remove ``path`` (if there) and its folder once empty."""
    path.unlink(missing_ok=True)
    if path.parent.is_dir() and not any(path.parent.iterdir()):
        path.parent.rmdir()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="smoke")
    parser.add_argument("--arithmetic", action="store_true",
                        help="store this machine arithmetic's entries (where they differ from "
                             "the reference goldens) instead of the reference goldens")
    parser.add_argument("experiments", nargs="*")
    args = parser.parse_args(argv)
    chosen = args.experiments or (list(CHEAP_AT_CPU) if args.scale == "cpu" else experiments())
    os.environ.setdefault("BENCH_RESULTS_DIR", tempfile.mkdtemp(prefix="golden-"))
    root = golden_data_root(Path(tempfile.mkdtemp(prefix="golden-data-")))
    os.environ.update(root.environment())
    for experiment in chosen:
        print(experiment, flush=True)
        entries = capture(experiment, args.scale)
        if reads_data_files(experiment):
            entries[DATA_ORIGINS_KEY] = comparable_origins(root.origins)
        path = store_entries(experiment, args.scale, entries, this_machine=args.arithmetic)
        print(f"  -> {path if path.exists() else 'no entry differs from the reference'}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
