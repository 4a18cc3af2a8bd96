"""Several experiments' multiruns on one set of workers, each experiment's reports rendered as
soon as its last multirun ends.

``bench.reproduce`` hands this module one :class:`ExperimentPlan` per experiment, in the
order given. The multiruns of all plans form one queue: a worker that finishes takes the next
one, whichever experiment it belongs to, so the cores do not wait while one experiment's last
long job ends (``make reproduce-all`` ran the experiments one after another, and every
experiment's tail left a core idle). Networks two experiments both need are trained once: the
network store's lock makes a second taker wait. Reports render one at a time beside the jobs
(they read records, they do not train).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

POLL_S = 0.2


@dataclass
class ExperimentPlan:
    """An experiment's multirun commands and the command rendering its reports (None: the
    records only). ``label`` names it in messages."""

    label: str
    commands: list[list[str]]
    report: list[str] | None = None
    job_statuses: list[int] = field(default_factory=list)

    def jobs_status(self) -> int:
        """0 when every multirun succeeded, 1 when some job failed (a multirun's status 1),
        otherwise the first other non-zero status."""
        return combined_status(self.job_statuses)


PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has Linux send the child SIGTERM when the process that started
    it dies (SIGKILL of ``bench.reproduce`` left its workers running until their jobs ended);
    None where there is no ``prctl`` (other systems keep the old behaviour)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def arm() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a cluster's job end) while the queue runs: stopped as Ctrl-C is."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated


def stop_processes(processes: list[subprocess.Popen], grace_s: float = 60.0) -> None:
    """Pass Ctrl-C on to ``processes`` (a terminal already did; a ``kill -INT`` of this
    process did not) and wait for them to leave their records consistent; kill what is still
    running after ``grace_s`` seconds."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    for process in processes:
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_plans(plans: list[ExperimentPlan], workers: int,
              job_env: Mapping[str, str] | None = None) -> list[int]:
    """Run every plan's commands, at most ``workers`` at once, in plan order; each plan's
    report command starts once its last command ended (one report at a time, not counted as a
    worker). Returns each plan's status: its jobs' status when it is neither 0 nor 1 (no report
    then), 1 when some job failed (the report is still rendered), else the report's status.
    Ctrl-C, or SIGTERM (raised as :class:`Terminated`), stops every process
    (:func:`stop_processes`) and is raised again."""
    pending = deque((index, command) for index, plan in enumerate(plans)
                    for command in plan.commands)
    left = [len(plan.commands) for plan in plans]
    statuses: list[int | None] = [None] * len(plans)
    reports_due = deque(index for index, count in enumerate(left) if count == 0)
    running: dict[subprocess.Popen, int] = {}
    report: tuple[subprocess.Popen, int] | None = None
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    try:
        while pending or running or reports_due or report:
            while pending and len(running) < workers:
                index, command = pending.popleft()
                running[subprocess.Popen(command, env=job_env,
                                         preexec_fn=die_with_parent())] = index
            for process in [p for p in running if p.poll() is not None]:
                index = running.pop(process)
                plans[index].job_statuses.append(process.returncode)
                left[index] -= 1
                if left[index] == 0:
                    reports_due.append(index)
            if report and report[0].poll() is not None:
                process, index = report
                statuses[index] = 1 if plans[index].jobs_status() == 1 else process.returncode
                report = None
            while report is None and reports_due:
                index = reports_due.popleft()
                plan = plans[index]
                if plan.report is None or plan.jobs_status() not in (0, 1):
                    statuses[index] = plan.jobs_status()
                else:
                    report = (subprocess.Popen(plan.report, preexec_fn=die_with_parent()),
                              index)
            if running or report:
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        stop_processes([*running, *([report[0]] if report else [])])
        raise
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
    return [int(status) for status in statuses]


def combined_status(statuses: list[int]) -> int:
    """One exit status for several plans: the first neither 0 nor 1, else 1 if any is 1."""
    hard = [status for status in statuses if status not in (0, 1)]
    if hard:
        return hard[0]
    return int(any(statuses))
