"""Run one method on every experiment it fits, then render the leaderboard with it in place.

    python -m bench.benchmark_method mc_dropout [--scale cpu] [--dry-run] [--workers N]
    make benchmark METHOD=mc_dropout [SCALE=cpu]

The experiments considered are those that compare methods (their sweep is ``method:
appears_in``, directly or through the experiment they load, like Laplace Redux Figure 9
through Table 3; side-run configs are not). The method fits one when the experiment's task
takes it (:func:`bench.harness.task_inputs.check_task_inputs`: the dataset class and method
protocol the task declares) and its data files are under the data root; every other
experiment is named with the reason. The method need not list the experiments in its
``appears_in``: that list is what the paper reproductions sweep. Its jobs run through
``python -m bench.reproduce <experiments> method=<name>`` (finished jobs are skipped, so a
rerun resumes), and ``reports/leaderboard.md`` is rendered from every record there.
``--dry-run`` lists the experiments, the skipped ones with their reasons, the jobs and an
estimate of their cost from the reports' job times (``timing.md``'s source).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from hydra.utils import get_method

from bench.cli import reproduce_command
from bench.harness.errors import ConfigError, require_choice
from bench.harness.method_membership import is_side_run, sweep_owner, sweeps_by_membership
from bench.harness.overrides import CONF_DIR, _check_composes, default_results_dir, group_options
from bench.harness.task_inputs import check_task_inputs
from bench.reporting.data_needs import missing_data
from bench.reporting.files import summary_path
from bench.reporting.leaderboard import LeaderboardError, write_leaderboard
from bench.reporting.registry import experiment_configs, specs_reading
from bench.reporting.specs import SPECS


@dataclass(frozen=True)
class Fit:
    """Whether a method fits one experiment: ``reason`` is "" when it does."""

    experiment: str
    reason: str = ""


def method_comparisons() -> list[str]:
    """The experiments that compare methods (sweep ``method: appears_in`` themselves or
    through the experiment they load), side runs left out, in natural order."""
    return [name for name in experiment_configs()
            if sweeps_by_membership(sweep_owner(name, CONF_DIR), CONF_DIR)
            and not is_side_run(name, CONF_DIR)]


def fit_of(method: str, experiment: str, scale: str) -> Fit:
    """Whether ``method`` fits ``experiment``: its task takes the method, and its data are
    at hand; otherwise the reason, one line."""
    try:
        cfg = _check_composes([f"experiment={experiment}", f"method={method}",
                               f"scale={scale}"], CONF_DIR)
        check_task_inputs(cfg, get_method(cfg.task._target_), CONF_DIR)
    except ConfigError as err:
        return Fit(experiment, str(err).split(": ", 1)[-1] if "does not fit" in str(err)
                   else str(err))
    except (ImportError, AttributeError, ValueError) as err:
        raise ConfigError(f"method={method}: its _target_ cannot be loaded "
                          f"({type(err).__name__}: {str(err).splitlines()[0]})") from None
    missing = [line for spec in specs_reading(experiment) for line in missing_data(spec)]
    if missing:
        return Fit(experiment, f"needs data: {missing[0]}")
    return Fit(experiment, "")


def method_fits(method: str, scale: str) -> list[Fit]:
    """``method``'s fit with every method-comparing experiment; a one-line ConfigError for an
    unknown method, or one that fits none (with each reason)."""
    require_choice("method", method, group_options()["method"])
    fits = [fit_of(method, experiment, scale) for experiment in method_comparisons()]
    if not any(not fit.reason for fit in fits):
        reasons = "; ".join(f"{fit.experiment}: {fit.reason}" for fit in fits)
        raise ConfigError(f"method={method} fits no experiment ({reasons})")
    return fits


def job_seconds_estimate(experiment: str, method: str,
                         reports: Path = reproduce_command.REPORTS
                         ) -> tuple[float, str] | None:
    """Seconds per job of ``method`` on ``experiment`` from its committed report's timings,
    else the experiment's mean job time (said so); None without a timed report."""
    for spec in specs_reading(experiment):
        path = summary_path(spec.paper, spec.artifact, reports)
        if not path.exists():
            continue
        timings = (json.loads(path.read_text()).get("timings") or {})
        for entry in timings.get("methods") or ():
            if entry.get("method") == method and entry.get("jobs"):
                return entry["job_seconds"] / entry["jobs"], "its own timed jobs"
        if timings.get("jobs"):
            return (timings["job_seconds"] / timings["jobs"],
                    f"the mean job of {spec.key}'s methods, not this method's")
    return None


def print_plan(fits: list[Fit], method: str, scale: str) -> None:
    """Which experiments run and which are skipped (why), with the cost estimates."""
    for fit in fits:
        if fit.reason:
            print(f"skip {fit.experiment}: {fit.reason}")
            continue
        estimate = job_seconds_estimate(fit.experiment, method)
        cost = (f"about {estimate[0]:.0f} s a job at the committed reports' scale ({estimate[1]})"
                if estimate else "no timed report to estimate from")
        print(f"run  {fit.experiment} ({scale}): {cost}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.benchmark_method",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("method", help="a conf/method option, e.g. mc_dropout")
    parser.add_argument("--scale", default="cpu", help="smoke | cpu | paper")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the experiments, the skipped ones and the jobs; run nothing")
    parser.add_argument("--workers", type=int, default=None,
                        help="multiruns run at once (default: the cores available)")
    parser.add_argument("--out", type=Path, default=reproduce_command.REPORTS,
                        help="reports folder")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the method's jobs on every experiment it fits, then the leaderboard; the exit
    status (2 for a user error, printed as one line)."""
    args = parse_args(argv)
    try:
        require_choice("scale", args.scale, reproduce_command.SCALES)
        fits = method_fits(args.method, args.scale)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print_plan(fits, args.method, args.scale)
    experiments = [fit.experiment for fit in fits if not fit.reason]
    command = [*experiments, f"method={args.method}", "--scale", args.scale, "--no-report",
               "--no-side-runs"]
    if args.workers is not None:
        command += ["--workers", str(args.workers)]
    if args.dry_run:
        command.append("--dry-run")
    status = reproduce_command.main(command)
    if args.dry_run or status not in (0, 1):  # a bad override, Ctrl-C or SIGTERM
        return status
    try:
        for path in write_leaderboard(SPECS.values(), default_results_dir(), args.out,
                                      args.scale):
            print(f"wrote {path}")
    except LeaderboardError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return status
