"""Run every job of one or more artifacts' experiments at one scale, then render their reports.

``python -m bench.reproduce ssla/table-1 --scale cpu`` finds the artifact's experiment (the
one its report spec reads: ``ssla/figure-2`` is drawn from ``ssla/table-2``'s records), reads
the experiment's ``sweep`` and per-scale ``seeds``, launches one Hydra multirun over them
(finished jobs are skipped), and renders the report of every artifact drawn from those records.
The experiment's side runs (configs whose ``name`` is the experiment's, e.g.
``laplace_redux/table-2-budget`` for ``laplace_redux/table-2``: records its report quotes as
measured causes) run after its own jobs unless ``--no-side-runs``.
``--workers N`` (default: the cores available) splits each multirun by seed, and where that
gives fewer than two per worker also by its first other swept key (``dataset``,
``map_recipe``, never ``method``), and runs up to N of them at once, each with ``cores / N``
torch threads; the methods of one seed stay in order (a MAP network before the methods that
reuse it) and records, identical to a one-process run's, are safe under concurrent writers.
``--launcher slurm`` submits the same multirun to Slurm through submitit instead (the reports
are then rendered by a later ``python -m bench.report``). Rendering also rewrites the overview
pages (README.md scoreboard, FINDINGS.md, timing.md) of the reports folder.
A sweep among the extra overrides (``seed=0,1``, ``task.n=100000,200000``) replaces the
experiment's seeds or that key's sweep values.

Several artifacts (``python -m bench.reproduce ssla/table-1 ssla/table-4``, or ``--all`` for
every implemented one, which ``make reproduce-all`` runs) share the workers: their multiruns
form one queue in the order given (an experiment named twice runs once), and each experiment's
reports are rendered as soon as its own jobs ended (:mod:`bench.cli.job_pool`), so no core
waits for one experiment's last job before the next experiment starts.

Reports go to ``reports/`` (``--out`` chooses another folder). A report there rendered at
another scale is never replaced unless ``--replace-scale``: the reports of such a run go to
``reports/<scale>/`` instead, and so do smoke-scale reports (CI checks, not results), so
``make reproduce-<x> SCALE=smoke`` leaves the committed reports as they are.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig, OmegaConf

from bench.cli.interrupt import INTERRUPTED, INTERRUPTED_STATUS
from bench.cli.job_pool import ExperimentPlan, Terminated, combined_status, run_plans
from bench.harness.arithmetic import pin_arithmetic, restart_pinned
from bench.harness.errors import ConfigError, require_choice
from bench.harness.finished_jobs import apply_scale_overrides
from bench.harness.method_membership import SWEEP_BY_MEMBERSHIP, methods_appearing_in
from bench.harness.overrides import (
    CONF_DIR,
    check_overrides,
    drop_empty_results_dir,
    group_options,
    require_writable_results_dir,
)
from bench.reporting.data_needs import missing_data
from bench.reporting.files import report_paths
from bench.reporting.registry import (
    experiment_file,
    implemented_artifacts,
    results_experiment,
    side_run_configs,
    specs_reading,
)
from bench.reporting.render import existing_report_scale
from bench.reporting.specs import SPECS

SCALES = ("smoke", "cpu", "paper")
# The committed reports; smoke-scale reports go to a folder of their own inside it.
REPORTS = Path("reports")
SEPARATE_SCALES = ("smoke",)


def _value_text(value) -> str:
    if isinstance(value, list | tuple):
        return "[" + ",".join(_value_text(v) for v in value) + "]"
    return str(value)


def artifact_experiment(artifact: str) -> str:
    """The experiment whose records ``artifact`` is reported from (an experiment name passes
    through); ConfigError listing the implemented artifacts otherwise."""
    if artifact in SPECS:
        return SPECS[artifact].experiment
    if artifact in group_options()["experiment"]:
        return artifact
    raise ConfigError(f"unknown artifact {artifact!r}; choose one of: "
                      f"{', '.join(implemented_artifacts())}")


def composable(overrides: list[str]) -> list[str]:
    """``overrides`` with each sweep (``method=a,b``) cut to its first value, so one config can
    be composed to read the experiment's sweep and seeds (the multirun gets the sweep itself)."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    return [f"{item.input_line.split('=', 1)[0]}={next(iter(item.sweep_string_iterator()))}"
            if item.is_sweep_override() else text for item, text in zip(parsed, overrides,
                                                                      strict=True)]


def check_sweeps(overrides: list[str]) -> None:
    """A one-line ConfigError naming a sweep among ``overrides`` whose values cannot be listed
    here (``glob(...)`` needs Hydra's config loader)."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as err:  # noqa: BLE001 - hydra raises its own OverrideParseException
        raise ConfigError(f"cannot parse overrides: {str(err).splitlines()[0]}") from None
    for item, text in zip(parsed, overrides, strict=True):
        if not item.is_sweep_override():
            continue
        try:
            next(iter(item.sweep_string_iterator()))
        except Exception as err:  # noqa: BLE001 - hydra raises its own HydraException
            raise ConfigError(f"{text} cannot be expanded ({str(err).splitlines()[0]}); give "
                              "a sweep as key=a,b or key=range(a,b)") from None


def sweep_overrides(experiment: str, scale: str, extra: list[str]) -> list[list[str]]:
    """Hydra multirun overrides covering the experiment's sweep and seeds at ``scale``.

    Usually one multirun. An experiment's ``seeds_for`` (``[{override: <key>=<value>, seeds:
    [...]}]``, set per scale through ``scale_overrides``) gives one sweep value its own,
    shorter seed list: that value leaves the main multirun and gets a multirun of its own.
    """
    require_choice("experiment", experiment, group_options()["experiment"])
    require_choice("scale", scale, SCALES)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={experiment}", f"scale={scale}",
                                           *composable(extra)])
    GlobalHydra.instance().clear()
    cfg = apply_scale_overrides(cfg, composable(extra))
    seeds = cfg.seeds[scale] if cfg.get("seeds") else cfg.scale.seeds
    overridden = {item.split("=", 1)[0] for item in extra}
    declared = declared_sweep(experiment, cfg.get("sweep"))
    sweep = {key: list(values) for key, values in declared.items() if key not in overridden}
    special = []
    for key, value, own_seeds in seed_lists(cfg.get("seeds_for"), declared):
        if key in overridden:
            continue
        sweep[key] = [v for v in sweep[key] if _value_text(v) != value]
        special.append((key, value, own_seeds))
    base = [f"experiment={experiment}", f"scale={scale}"]
    commands = []
    if all(sweep.values()):
        commands.append(base + _sweep_items(sweep, seeds, overridden) + extra)
    for key, value, own_seeds in special:
        commands.append(base + _sweep_items({**sweep, key: [value]}, own_seeds, overridden)
                        + extra)
    return commands


def declared_sweep(experiment: str, sweep: DictConfig | None) -> dict[str, list]:
    """The experiment's ``sweep`` as key -> values, with ``method: appears_in`` replaced by the
    method options that list the experiment (:mod:`bench.harness.method_membership`)."""
    declared = dict(_plain(sweep) or {})
    if declared.get("method") == SWEEP_BY_MEMBERSHIP:
        declared["method"] = methods_appearing_in(experiment, CONF_DIR)
    return declared


SEEDS_FOR_ENTRY = "{override: <swept key>=<value>, seeds: [<int>, ...]}"


def seed_lists(entries, sweep) -> list[tuple[str, str, list[int]]]:
    """``(key, value, seeds)`` of each ``seeds_for`` entry of an experiment whose ``sweep`` is
    given; a one-line ConfigError naming the entry and the expected shape
    (a list of ``SEEDS_FOR_ENTRY``) when one is malformed or names a key or value the sweep
    lacks."""
    entries, sweep = _plain(entries), _plain(sweep)
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError(f"seeds_for={entries!r} is not valid; it must be a list of "
                          f"{SEEDS_FOR_ENTRY}")
    found = []
    for index, entry in enumerate(entries):
        where = f"seeds_for[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"override", "seeds"}:
            keys = sorted(map(str, entry)) if isinstance(entry, dict) else None
            got = f"keys {keys}" if keys is not None else repr(entry)
            raise ConfigError(f"{where} is not valid ({got}); each entry must be "
                              f"{SEEDS_FOR_ENTRY}")
        override, seeds = entry["override"], entry["seeds"]
        key, equals, value = str(override).partition("=")
        if not isinstance(override, str) or not equals or not key or not value:
            raise ConfigError(f"{where}.override={override!r} is not valid; it must read "
                              f"<swept key>=<value>, e.g. {next(iter(sweep), 'dataset')}=...")
        if key not in sweep:
            raise ConfigError(f"{where}.override={override!r} is not valid; {key} is not swept "
                              f"by this experiment; choose one of: {', '.join(sweep) or '(none)'}")
        values = [_value_text(v) for v in sweep[key]]
        if value not in values:
            raise ConfigError(f"{where}.override={override!r} is not valid; the sweep of {key} "
                              f"has no {value}; choose one of: {', '.join(values)}")
        if (not isinstance(seeds, list) or not seeds
                or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds)):
            raise ConfigError(f"{where}.seeds={seeds!r} is not valid; it must be a non-empty "
                              "list of integers")
        if any((key, value) == (k, v) for k, v, _ in found):
            raise ConfigError(f"{where}.override={override!r} is not valid; an earlier entry of "
                              "seeds_for already gives it its seeds")
        found.append((key, value, list(seeds)))
    return found


def _plain(value):
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _sweep_items(sweep: dict, seeds: list, overridden: set[str]) -> list[str]:
    items = [] if "seed" in overridden else ["seed=" + ",".join(str(s) for s in seeds)]
    return items + [f"{key}=" + ",".join(_value_text(v) for v in values)
                    for key, values in sweep.items()]


def narrowing_overrides(experiment: str, extra: list[str]) -> list[str]:
    """The keys among ``extra`` that replace what ``experiment`` sweeps (its ``sweep`` keys and
    the seeds): a command narrowed to other methods or seeds does not run its side runs."""
    swept = {"seed", *(experiment_file(experiment).get("sweep") or {})}
    keys = [item.split("=", 1)[0].lstrip("+~") for item in extra if "=" in item]
    return [key for key in keys if key in swept]


def report_folder(artifacts: list[str], scale: str, out: Path | None = None,
                  replace_scale: bool = False) -> tuple[Path, str | None]:
    """The folder the reports of ``artifacts`` rendered at ``scale`` go to, and a note for the
    user when it is not ``reports/``.

    ``out`` when given. Otherwise ``reports/``, unless the scale is smoke or a report of one
    of ``artifacts`` there was rendered at another scale: then ``reports/<scale>/``, so those
    reports stay as they are; ``replace_scale`` keeps ``reports/`` (and lets them be replaced).
    """
    if out is not None:
        return Path(out), None
    if replace_scale:
        return REPORTS, None
    elsewhere = REPORTS / scale
    others = {}
    for key in artifacts:
        spec = SPECS[key]
        found = existing_report_scale(report_paths(spec.paper, spec.artifact, REPORTS)["md"])
        if found and found != scale:
            others[key] = found
    if others:
        held = ", ".join(f"the {found}-scale report of {key}" for key, found in others.items())
        return elsewhere, (f"{REPORTS} holds {held}; the {scale}-scale reports go to "
                           f"{elsewhere} (pass --replace-scale to replace what {REPORTS} holds, "
                           "or --out DIR)")
    if scale in SEPARATE_SCALES:
        return elsewhere, (f"{scale}-scale reports go to {elsewhere}, apart from the committed "
                           f"reports (pass --out DIR to choose the folder)")
    return REPORTS, None


def available_cores() -> int:
    """Cores this process may run on (the affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def split_by_seed(overrides: list[str]) -> list[list[str]]:
    """One multirun per value of the ``seed=`` sweep item of ``overrides``, read by Hydra's own
    parser (``1,2``, ``range(0,3)``, ``choice(4,5)``); unchanged when it has one value or
    none."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    for index, item in enumerate(parsed):
        if item.key_or_group == "seed" and item.is_sweep_override():
            return [overrides[:index] + [f"seed={seed}"] + overrides[index + 1:]
                    for seed in item.sweep_string_iterator()]
    return [overrides]


# Sweep keys kept inside one multirun when a seed's multirun is split further: a seed's
# methods share that seed's stored network (the MAP a Laplace fit, a DE or SWAG starts from).
KEPT_IN_ORDER = ("seed", "method")


def split_by_first_sweep(overrides: list[str]) -> list[list[str]]:
    """One multirun per value of the first sweep item of ``overrides`` whose key is not in
    ``KEPT_IN_ORDER`` (unchanged when there is none). Experiments sweep the key that picks
    the network first (``dataset``, ``map_recipe``), so the parts rarely need one network."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    for index, item in enumerate(parsed):
        key = item.input_line.split("=", 1)[0]
        if item.is_sweep_override() and key not in KEPT_IN_ORDER:
            return [overrides[:index] + [f"{key}={value}"] + overrides[index + 1:]
                    for value in item.sweep_string_iterator()]
    return [overrides]


def split_for_workers(multiruns: list[list[str]], workers: int) -> list[list[str]]:
    """The multiruns ``workers`` parallel processes take in turn.

    One per seed (:func:`split_by_seed`). Fewer than two per worker leaves cores idle (an
    experiment of one seed ran on one core), so each is then split once more by its first
    other sweep key (:func:`split_by_first_sweep`), ordered value by value so that parts
    running side by side belong to different seeds and rarely wait on one network's training
    (the network store's lock makes a second taker wait, never train it twice).
    """
    by_seed = [one for overrides in multiruns for one in split_by_seed(overrides)]
    if len(by_seed) >= 2 * workers:
        return by_seed
    parts = [split_by_first_sweep(overrides) for overrides in by_seed]
    return [part[index] for index in range(max(map(len, parts), default=0))
            for part in parts if index < len(part)]


def worker_environment(workers: int) -> dict[str, str]:
    """The environment of one of ``workers`` parallel multiruns: the cores shared out as torch
    threads, unless the caller set OMP_NUM_THREADS itself."""
    env = dict(os.environ)
    if workers > 1 and "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(max(1, available_cores() // workers))
    return env


def run_commands(commands: list[list[str]], workers: int) -> int:
    """Run ``commands`` with at most ``workers`` at once; 0 when all succeed, 1 when some job
    failed (a multirun's status 1), otherwise the first other non-zero status."""
    return run_plans([ExperimentPlan("", commands)], workers, worker_environment(workers))[0]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; Ctrl-C stops with one line and status 130, SIGTERM while
    jobs run with the same line and status 143 (128 + SIGTERM), its jobs stopped first."""
    try:
        return _main(argv)
    except KeyboardInterrupt as stop:
        print(INTERRUPTED, file=sys.stderr)
        return 128 + signal.SIGTERM if isinstance(stop, Terminated) else INTERRUPTED_STATUS


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reproduce", description=__doc__)
    parser.add_argument("items", nargs="*", metavar="ARTIFACT|OVERRIDE",
                        help="artifacts, e.g. ssla/table-1 (python -m bench.cli.artifacts), "
                             "and extra Hydra overrides, e.g. device=cuda")
    parser.add_argument("--all", action="store_true",
                        help="every implemented artifact (make reproduce-all)")
    parser.add_argument("--scale", default="cpu", help="smoke | cpu | paper")
    parser.add_argument("--launcher", default=None, help="hydra/launcher option, e.g. slurm")
    parser.add_argument("--no-report", action="store_true", help="only run the jobs")
    parser.add_argument("--out", type=Path, default=None,
                        help="reports folder (default: reports/, or reports/<scale>/ for smoke "
                             "and where reports/ holds reports of another scale)")
    parser.add_argument("--replace-scale", action="store_true",
                        help="let the reports replace those rendered at another scale")
    parser.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    parser.add_argument("--no-side-runs", action="store_true",
                        help="skip the experiment's side-run configs")
    parser.add_argument("--skip-missing-data", action="store_true",
                        help="an artifact whose data files are not under the data root: one "
                             "line, its 'needs data' report, status 0 (make reproduce-all)")
    parser.add_argument("--workers", type=int, default=None,
                        help="multiruns run at once (default: the cores available; "
                             "1 runs everything in one process)")
    parser.add_argument("--pinned-arithmetic", action="store_true",
                        help="compute in the arithmetic every x86-64 CPU rounds alike (one "
                             "thread a job, no vector kernels; bench/harness/arithmetic.py), "
                             "so another machine reproduces the records bit for bit")
    args = parser.parse_intermixed_args(argv)
    if args.pinned_arithmetic:
        run_pinned(argv)
    artifacts, overrides = split_items(args.items)
    if args.all:
        artifacts = list(implemented_artifacts()) + artifacts
    if not artifacts:
        parser.error("name an artifact (python -m bench.cli.artifacts lists them) or pass --all")
    try:
        extra = drop_empty_results_dir(overrides)
        if args.launcher:
            extra.append(f"hydra/launcher={args.launcher}")
        experiments = {}
        for artifact in artifacts:
            experiments.setdefault(artifact_experiment(artifact), artifact)
        check_sweeps(extra)
        check_overrides([f"experiment={next(iter(experiments))}", *extra])
        results_dir = require_writable_results_dir(extra)
        workers = available_cores() if args.workers is None else args.workers
        if workers < 1:
            raise ConfigError(f"--workers must be a positive integer, got {workers}")
        plans = [experiment_plan(args, experiment, label, extra, results_dir, workers)
                 for experiment, label in experiments.items()]
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.dry_run:
        return 0
    if args.launcher:
        workers = 1
    # fewer multiruns than workers: each gets more torch threads (worker_environment)
    workers = max(1, min(workers, sum(len(plan.commands) for plan in plans)))
    return run_and_report(plans, workers)


def run_pinned(argv: list[str] | None) -> None:
    """Go on in the pinned arithmetic: from the command line, the command starts again in it
    (glibc reads its part at process start); called with ``argv``, the multiruns it starts are
    pinned from their start. Where it cannot be pinned, one line says so and the native
    kernels run."""
    why = restart_pinned("bench.reproduce", sys.argv[1:]) if argv is None else None
    if why:
        print(f"note: --pinned-arithmetic: {why}; running the native kernels", file=sys.stderr)
        return
    pin_arithmetic()


def split_items(items: list[str]) -> tuple[list[str], list[str]]:
    """The artifacts and the Hydra overrides among the command line's positional ``items``:
    an override has a ``=`` or starts with ``~`` or ``+``; an artifact never does."""
    overrides = [item for item in items if "=" in item or item[:1] in "~+"]
    return [item for item in items if item not in overrides], overrides


def experiment_plan(args: argparse.Namespace, experiment: str, label: str, extra: list[str],
                    results_dir: Path, workers: int) -> ExperimentPlan:
    """The multirun commands of ``experiment`` (its side runs after its own jobs, split for
    ``workers`` parallel processes) and the command rendering its reports, named ``label``
    (the artifact given); the commands are printed. An experiment whose data are missing
    under ``--skip-missing-data`` gets one line and no commands (its report says "needs
    data")."""
    multiruns = sweep_overrides(experiment, args.scale, extra)
    if not args.no_side_runs:
        for side in side_run_configs(experiment):
            narrowed = narrowing_overrides(side, extra)
            if narrowed:
                print(f"note: side run {side} skipped: {', '.join(narrowed)} on the command "
                      "line narrows what it runs (run it on its own to include it)",
                      file=sys.stderr)
                continue
            multiruns += sweep_overrides(side, args.scale, extra)
    if workers > 1 and not args.launcher:
        multiruns = split_for_workers(multiruns, workers)
    commands = [[sys.executable, "-m", "bench.run", "-m", *overrides] for overrides in multiruns]
    for command in commands:
        print(" ".join(command[1:]))
    missing = []
    if args.skip_missing_data and not args.dry_run:
        missing = missing_experiment_data(experiment)
    if missing:
        print(f"skipped {label}: needs data: {missing[0]}", file=sys.stderr)
        commands = []
    report = None if args.no_report or args.launcher else report_command(args, experiment,
                                                                         results_dir)
    return ExperimentPlan(label, commands, report)


def missing_experiment_data(experiment: str) -> list[str]:
    """The missing data files (one line per data need) of every report drawn from
    ``experiment``'s records: its jobs cannot run while any is missing."""
    return [line for spec in specs_reading(results_experiment(experiment))
            for line in missing_data(spec)]


def run_and_report(plans: list[ExperimentPlan], workers: int) -> int:
    """Run the plans' multiruns on ``workers`` processes, each plan's reports rendered when its
    jobs ended (:func:`bench.cli.job_pool.run_plans`); the exit status, with one line per plan
    whose jobs failed."""
    statuses = run_plans(plans, workers, worker_environment(workers))
    failed = [plan.label for plan, status in zip(plans, statuses, strict=True) if status]
    for plan in plans:
        if plan.jobs_status() == 1:
            print(f"error: {plan.label}: some jobs failed (listed above)", file=sys.stderr)
    if len(plans) > 1 and failed:
        print(f"error: failed: {' '.join(failed)} (run again: finished jobs are skipped)",
              file=sys.stderr)
    return combined_status(statuses)


def report_command(args: argparse.Namespace, experiment: str,
                   results_dir: Path) -> list[str] | None:
    """The ``bench.report`` command rendering every report drawn from ``experiment``'s records
    and the overview pages (the note of :func:`report_folder` printed when it has one); None
    with a note when no report spec reads them."""
    artifacts = [spec.key for spec in specs_reading(results_experiment(experiment))]
    if not artifacts:
        print(f"note: no report spec reads {experiment}; records only", file=sys.stderr)
        return None
    out, note = report_folder(artifacts, args.scale, args.out, args.replace_scale)
    if note:
        print(f"note: {note}", file=sys.stderr)
    command = [sys.executable, "-m", "bench.report", *artifacts, "--scale", args.scale,
               "--results-dir", str(results_dir), "--out", str(out), "--index"]
    if args.replace_scale:
        command.append("--replace-scale")
    return command


if __name__ == "__main__":
    sys.exit(main())
