"""Store (or check) golden cells: what every experiment's jobs produce at a given scale.

``python -m tests.golden.capture --scale smoke`` runs every job of every experiment config
in-process (the jobs ``bench.cli.reproduce_command`` would launch) and writes their cells,
metrics and a fingerprint of their figure arrays to
``tests/golden/<scale>/<paper>__<artifact>.json``. The regression test
(``tests/integration/test_golden_cells.py``) re-runs the jobs and compares them to a relative
tolerance of ``RELATIVE_TOLERANCE`` (``assert_matches_golden``), so code that moves cannot
change a number unnoticed, while the last-digit differences that the same float program shows
on another CPU (other vector units sum in another order) pass.

The jobs run in the pinned float arithmetic (:mod:`bench.harness.arithmetic`), which every
x86-64 CPU computes to the same bits: a training that turns a last-digit difference into
another network gives the same network on every such machine, so one golden file per
experiment serves them all. ``capture`` restarts itself in that arithmetic where it was not
started in it (glibc reads its part at process start only). Where the arithmetic cannot be
pinned (another processor), the regression test compares an entry that moved beyond the
tolerance on its invariants only (:func:`invariant_mismatches`) and reports it skipped.

``--into DIR`` writes the entries under ``DIR`` instead, and ``--same-bits-as DIR`` lists every
value that is not bit-identical between this capture and the one in ``DIR``
(``tools/golden_arithmetic.sh`` captures under each ISA setting this machine can reach).
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

from bench.harness.arithmetic import restart_pinned

GOLDEN_DIR = Path(__file__).resolve().parent
# In the pinned arithmetic every x86-64 CPU gives the same bits; the tolerance lets a job
# that does not amplify rounding pass where the arithmetic cannot be pinned, while a real
# change moves numbers by more.
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


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _walk(got, expected, path: str, numbers) -> list[str]:
    """Where ``got`` differs from ``expected``: keys, lengths, strings and ``None`` exactly,
    each pair of numbers by ``numbers(got, expected, path)`` (the problems it finds)."""
    if isinstance(expected, dict) and isinstance(got, dict):
        if set(got) != set(expected):
            return [f"{path}: keys {sorted(set(got) ^ set(expected))} differ"]
        return [m for key in expected
                for m in _walk(got[key], expected[key], f"{path}/{key}", numbers)]
    if isinstance(expected, list) and isinstance(got, list):
        if len(got) != len(expected):
            return [f"{path}: length {len(got)} != {len(expected)}"]
        return [m for i, (g, e) in enumerate(zip(got, expected, strict=True))
                for m in _walk(g, e, f"{path}/{i}", numbers)]
    if _is_number(got) and _is_number(expected):
        return numbers(got, expected, path)
    return _same_bits(got, expected, path)


def _within_tolerance(got, expected, path: str) -> list[str]:
    if math.isclose(got, expected, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE):
        return []
    return [f"{path}: {got!r} != {expected!r}"]


def _same_bits(got, expected, path: str) -> list[str]:
    same = type(got) is type(expected) and got == expected
    return [] if same else [f"{path}: {got!r} != {expected!r}"]


def _same_invariants(got, expected, path: str) -> list[str]:
    if math.isfinite(expected) != math.isfinite(got):
        return [f"{path}: {got!r} where {expected!r} is stored"]
    if 0.0 <= expected <= 1.0 and not 0.0 <= got <= 1.0:
        return [f"{path}: {got!r} outside [0, 1] where {expected!r} is stored"]
    return []


def mismatches(got, expected, path: str = "") -> list[str]:
    """Where ``got`` differs from ``expected`` beyond the golden tolerance (empty: they match).

    Numbers compare to ``RELATIVE_TOLERANCE`` / ``ABSOLUTE_TOLERANCE``; everything else
    (strings, ``None``, lengths, keys) exactly."""
    return _walk(got, expected, path, _within_tolerance)


def invariant_mismatches(got, expected, path: str = "") -> list[str]:
    """Where ``got`` breaks what rounding cannot move: the same keys, lengths, strings and
    non-finite values, every number finite where the stored one is, and inside [0, 1] where
    the stored one is (probabilities, accuracies, coverages). Numbers are not compared."""
    return _walk(got, expected, path, _same_invariants)


def run_job(job: list[str], with_record: bool = False):
    """Run one job in-process (into ``$BENCH_RESULTS_DIR``); its golden entry (and record).

    Torch runs on one thread, as at capture, so reductions sum in the same order."""
    import torch

    from bench.harness.job_execution import execute
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


def golden_path(experiment: str, scale: str, folder: Path = GOLDEN_DIR) -> Path:
    """Where the goldens of one experiment at one scale live (under ``folder``)."""
    return folder / scale / (experiment.replace("/", "__") + ".json")


def entry_mismatches(got: dict, expected: dict, compare=mismatches) -> list[str]:
    """Where a job's golden entry differs from a stored one (status, cells, metrics, arrays),
    by ``compare`` (the golden tolerance, or :func:`invariant_mismatches`)."""
    return [m for part in ("status", "cells", "metrics", "arrays")
            for m in compare(got[part], expected[part], part)]


def differing_bits(folder: Path, reference: Path) -> list[str]:
    """Every golden value under ``folder`` that is not bit-identical to the one under
    ``reference`` (a file missing on either side counts as differing)."""
    found = []
    for path in sorted(folder.rglob("*.json")):
        other = reference / path.relative_to(folder)
        if not other.exists():
            found.append(f"{path.relative_to(folder)}: not in {reference}")
            continue
        got, stored = json.loads(path.read_text()), json.loads(other.read_text())
        found.extend(f"{path.relative_to(folder)}: {problem}"
                     for problem in _walk(got, stored, "", _same_bits))
    return found


def store_entries(path: Path, entries: dict) -> Path:
    """Write ``entries`` as the goldens at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="smoke")
    parser.add_argument("--into", type=Path, default=GOLDEN_DIR,
                        help="write the goldens under this folder instead of tests/golden")
    parser.add_argument("--same-bits-as", type=Path, default=None,
                        help="then list every value not bit-identical to the goldens there")
    parser.add_argument("--with", dest="changes", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="set NAME=VALUE after the pinned arithmetic (a measurement of "
                             "what one kernel setting moves, with --into; never for goldens)")
    parser.add_argument("experiments", nargs="*")
    args = parser.parse_args(argv)
    if args.changes and args.into == GOLDEN_DIR:
        parser.error("--with measures another arithmetic: give --into")
    if any("=" not in change for change in args.changes):
        parser.error(f"--with takes NAME=VALUE, got {[c for c in args.changes if '=' not in c]}")
    if argv is None:
        changed = dict(change.split("=", 1) for change in args.changes)
        why = restart_pinned("tests.golden.capture", sys.argv[1:], changed)
        if why:
            sys.exit(f"error: goldens are captured in the pinned arithmetic, and here {why}")
    chosen = args.experiments or (list(CHEAP_AT_CPU) if args.scale == "cpu" else experiments())
    os.environ.setdefault("BENCH_RESULTS_DIR", tempfile.mkdtemp(prefix="golden-"))
    root = golden_data_root(Path(tempfile.mkdtemp(prefix="golden-data-")))
    os.environ.update(root.environment())
    for experiment in chosen:
        print(experiment, flush=True)
        entries = capture(experiment, args.scale)
        if reads_data_files(experiment):
            entries[DATA_ORIGINS_KEY] = comparable_origins(root.origins)
        path = store_entries(golden_path(experiment, args.scale, args.into), entries)
        print(f"  -> {path}", flush=True)
    if args.same_bits_as is not None:
        differ = differing_bits(args.into / args.scale, args.same_bits_as / args.scale)
        print("\n".join(differ) or f"every value bit-identical to {args.same_bits_as}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
