"""Render reports from run records.

    python -m bench.report ssla/table-7 [more ...] [--scale cpu] [--results-dir DIR] [--out reports]
    python -m bench.report --all [--scale cpu]      # every spec that has records
    python -m bench.report --index                  # rewrite README.md, FINDINGS.md, timing.md
    python -m bench.report --leaderboard [--scale cpu]  # reports/leaderboard.md

The results folder defaults to ``$BENCH_RESULTS_DIR`` or ``./results``. Without ``--scale``
the largest scale with records is used (paper > cpu > smoke).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.harness.overrides import default_results_dir
from bench.harness.records import RECORD_NAME, iter_records
from bench.reporting.backfill import backfill_summaries
from bench.reporting.catalog import catalog_entry, make_target
from bench.reporting.data_needs import NEEDS_DATA, missing_data, render_needs_data
from bench.reporting.files import summary_path
from bench.reporting.index import write_overview
from bench.reporting.leaderboard import LeaderboardError, write_leaderboard
from bench.reporting.render import ScaleConflict, render_report
from bench.reporting.spec import ArtifactSpec
from bench.reporting.specs import SPECS
from bench.reporting.summary import DamagedSummary, MissingCause

SCALE_ORDER = ("paper", "cpu", "smoke")
# The leaderboard ranks one scale; without --scale, the scale the committed reports use.
LEADERBOARD_SCALE = "cpu"


class ReportError(Exception):
    """A problem the user can fix, printed as one line (exit status 2)."""


def scales_present(results_dir: Path, experiment: str) -> list[str]:
    """Scales with at least one record for the experiment, largest first."""
    root = Path(results_dir) / experiment
    found = {path.parent.parent.name for path in root.glob(f"*/*/{RECORD_NAME}")}
    known = [scale for scale in SCALE_ORDER if scale in found]
    return known + sorted(found - set(SCALE_ORDER))


def resolve_spec(name: str) -> ArtifactSpec:
    """The spec registered as ``name``; ReportError listing the choices otherwise."""
    if name in SPECS:
        return SPECS[name]
    hint = " (it is in the catalog but has no report spec yet)" if catalog_entry(name) else ""
    raise ReportError(f"unknown artifact {name!r}{hint}; choose one of: {', '.join(SPECS)}")


def choose_scale(spec: ArtifactSpec, results_dir: Path, requested: str | None) -> str:
    """``requested``, or the largest scale with records (announced on stderr when several)."""
    target = make_target(spec.paper, spec.artifact)
    if requested:
        if not (Path(results_dir) / spec.experiment / requested).is_dir():
            folder = Path(results_dir) / spec.experiment / requested
            raise ReportError(f"no records in {folder}; produce them with "
                              f"`make {target} SCALE={requested}`")
        return requested
    present = scales_present(results_dir, spec.experiment)
    if not present:
        raise ReportError(f"no records in {Path(results_dir) / spec.experiment} (at any scale); "
                          f"produce them with `make {target}`")
    if len(present) > 1:
        print(f"note: {spec.key} has records at scales {', '.join(present)}; reporting "
              f"{present[0]!r}, the largest (pass --scale to choose)", file=sys.stderr)
    return present[0]


def load_records(spec: ArtifactSpec, results_dir: Path, scale: str,
                 damaged: list | None = None) -> list[dict]:
    """All valid records of the spec's experiment at ``scale`` (damaged ones appended to
    ``damaged``); ReportError when there are none."""
    records = list(iter_records(results_dir, spec.experiment, scale, damaged))
    if not records:
        folder = Path(results_dir) / spec.experiment / scale
        raise ReportError(f"no records in {folder}; produce them with "
                          f"`make {make_target(spec.paper, spec.artifact)} SCALE={scale}`")
    return records


def report_one(spec: ArtifactSpec, results_dir: Path, out_dir: Path, scale: str | None,
               replace_scale: bool = False) -> None:
    """Render one spec's report at the chosen scale and print the written paths; with no
    records and data missing, the "needs data" report instead."""
    if spec.needs_data and not scales_present(results_dir, spec.experiment):
        missing = missing_data(spec)
        if missing:
            for path in render_needs_data(spec, missing, out_dir):
                print(f"wrote {path} ({NEEDS_DATA})")
            return
    chosen = choose_scale(spec, results_dir, scale)
    damaged: list = []
    records = load_records(spec, results_dir, chosen, damaged)
    for err in damaged:
        print(f"warning: {err}", file=sys.stderr)
    try:
        written = render_report(spec, records, out_dir, damaged=[str(e) for e in damaged],
                                replace_scale=replace_scale)
    except (ScaleConflict, MissingCause) as err:
        raise ReportError(str(err)) from None
    for path in [*written, summary_path(spec.paper, spec.artifact, out_dir)]:
        print(f"wrote {path}")


def report_all(results_dir: Path, out_dir: Path, scale: str | None,
               replace_scale: bool = False) -> None:
    """Render every spec that has records (skipping the others, with a line each)."""
    for spec in SPECS.values():
        try:
            report_one(spec, results_dir, out_dir, scale, replace_scale)
        except ReportError as err:
            print(f"skip {spec.key}: {err}", file=sys.stderr)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; artifacts, --all or --index (--index may join either)."""
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artifacts", nargs="*", help="e.g. ssla/table-7 ssla/figure-2")
    parser.add_argument("--all", action="store_true", help="render every spec that has records")
    parser.add_argument("--index", action="store_true",
                        help="rewrite <out>/README.md, FINDINGS.md and timing.md (first reading "
                             "the summary of any report that lacks a current one from its "
                             "files)")
    parser.add_argument("--leaderboard", action="store_true",
                        help="render <out>/leaderboard.md (.png, .csv): every method ranked on "
                             "each artifact's leaderboard metrics, at --scale (default cpu)")
    parser.add_argument("--scale", help="smoke, cpu or paper (default: largest with records)")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="records folder (default: $BENCH_RESULTS_DIR or ./results)")
    parser.add_argument("--out", type=Path, default=Path("reports"), help="reports folder")
    parser.add_argument("--replace-scale", action="store_true",
                        help="let a report replace one rendered at another scale")
    args = parser.parse_args(argv)
    if args.artifacts and args.all:
        parser.error("give artifacts or --all, not both")
    if not (args.artifacts or args.all or args.index or args.leaderboard):
        parser.error("give an artifact, --all, --index or --leaderboard")
    args.results_dir = args.results_dir or default_results_dir()
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (2 for a user error, printed as one line)."""
    args = parse_args(argv)
    try:
        for spec in [resolve_spec(name) for name in args.artifacts]:
            report_one(spec, args.results_dir, args.out, args.scale, args.replace_scale)
        if args.all:
            report_all(args.results_dir, args.out, args.scale, args.replace_scale)
        if args.index or args.all:
            for path in backfill_summaries(SPECS, args.out):
                print(f"wrote {path} (backfilled from the report's files)")
            for path in write_overview(args.out):
                print(f"wrote {path}")
        if args.leaderboard:
            for path in write_leaderboard(SPECS.values(), args.results_dir, args.out,
                                          args.scale or LEADERBOARD_SCALE):
                print(f"wrote {path}")
    except (ReportError, MissingCause, DamagedSummary, LeaderboardError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
