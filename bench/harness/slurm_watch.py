"""What the jobs of a Slurm multirun are doing, in lines the submitting command prints.

:class:`SlurmWatch` is fed snapshots of the jobs' Slurm states (and, for pending jobs, Slurm's
reason) and returns the lines to print: one per job as it starts, is requeued, finishes, times
out, is cancelled or fails (its Slurm job id, state and log path), one line while jobs pend
longer than :data:`PENDING_NOTE_S` with Slurm's reason (repeated at most every
:data:`PENDING_REPEAT_S`, or sooner when the reason changes), and a summary at the end. It holds
no Slurm calls itself (:mod:`hydra_plugins.bench_launcher.reporting_slurm_launcher` polls
Slurm), so its lines are tested on made-up snapshots.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from bench.harness.progress import clock

# Seconds a job pends before a line says why, and between two such lines with the same reason
# (environment: BENCH_SLURM_PENDING_NOTE_S, BENCH_SLURM_PENDING_REPEAT_S).
PENDING_NOTE_S = 60.0
PENDING_REPEAT_S = 180.0
# Slurm states (sacct's first word) after which a job runs no more. TIMEOUT is final only when
# the job is not requeued (submitit requeues a timed-out job while it has requeues left).
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                "PREEMPTED", "BOOT_FAIL", "DEADLINE")
# How a final state reads in a line and in the summary.
STATE_WORDS = {"COMPLETED": "completed", "FAILED": "failed", "CANCELLED": "cancelled",
               "TIMEOUT": "timed out", "OUT_OF_MEMORY": "out of memory",
               "NODE_FAIL": "node failed", "PREEMPTED": "preempted", "BOOT_FAIL": "boot failed",
               "DEADLINE": "past its deadline"}


def seconds_from_environment(name: str, default: float) -> float:
    """A non-negative number of seconds from the environment variable ``name``, else
    ``default`` (unset, empty or not a number)."""
    try:
        value = float(os.environ.get(name) or default)
    except ValueError:
        return default
    return value if value >= 0 else default


def plain_state(state: str) -> str:
    """Slurm's state without what follows its first word (``CANCELLED by 0`` -> ``CANCELLED``),
    upper case; ``UNKNOWN`` when empty."""
    words = (state or "").split()
    return words[0].upper() if words else "UNKNOWN"


@dataclass
class WatchedJob:
    """One job of the multirun: its Slurm id, what it runs and where it logs."""

    job_id: str
    label: str
    log: str
    state: str = "PENDING"
    ended: bool = False
    outcome: str = ""
    starts: int = 0


@dataclass
class SlurmWatch:
    """Turns snapshots of the jobs' states into the lines the submitting command prints."""

    jobs: list[WatchedJob]
    pending_note_s: float = PENDING_NOTE_S
    pending_repeat_s: float = PENDING_REPEAT_S
    _last_pending_note: float | None = None
    _last_reason: str = ""
    _pending_since: dict[str, float] = field(default_factory=dict)

    def submitted_line(self, folder: str) -> str:
        """The line after submission: how many jobs, their ids, where their logs go."""
        ids = ", ".join(job.job_id for job in self.jobs)
        return f"slurm: submitted {len(self.jobs)} job(s) ({ids}); logs under {folder}"

    def update(self, states: dict[str, str], reasons: dict[str, str] | None,
               now: float) -> list[str]:
        """The lines for the jobs whose state changed since the last snapshot, and a pending
        line when jobs have pended long enough. ``states`` maps job ids to Slurm states (a job
        missing from it keeps its state); ``reasons`` maps the jobs Slurm's queue lists as
        pending to its reason (a job it does not list has just started), or is None when the
        queue could not be read."""
        lines = []
        for job in self.jobs:
            if job.ended:
                continue
            state = plain_state(states.get(job.job_id, job.state))
            if state == "UNKNOWN":  # not yet in Slurm's accounting: nothing new
                state = job.state
            if state != job.state:
                line = self._transition_line(job, state)
                if line:
                    lines.append(line)
                job.state = state
            if state == "PENDING":
                self._pending_since.setdefault(job.job_id, now)
            else:
                self._pending_since.pop(job.job_id, None)
        pending = self._pending_line(reasons, now)
        return lines + ([pending] if pending else [])

    def _transition_line(self, job: WatchedJob, state: str) -> str:
        """The line of a job entering ``state``, or "" for a change with nothing new to say:
        an end (:meth:`ended_line` says it) or the pending that follows a requeue."""
        if state in FINAL_STATES or (state == "PENDING" and job.state == "REQUEUED"):
            return ""
        if state == "RUNNING":
            job.starts += 1
            what = "running" if job.starts == 1 else f"running again (attempt {job.starts})"
            return f"slurm job {job.job_id} {what}: {job.label}; log {job.log}"
        if state in ("REQUEUED", "PENDING") and job.state not in ("PENDING", "UNKNOWN"):
            return (f"slurm job {job.job_id} requeued (was {job.state}): {job.label}; it "
                    "resumes from its checkpoints")
        return f"slurm job {job.job_id} state {state}: {job.label}"

    def _pending_line(self, reasons: dict[str, str] | None, now: float) -> str:
        waiting = [job for job in self.jobs if not job.ended and job.job_id in self._pending_since
                   and now - self._pending_since[job.job_id] >= self.pending_note_s
                   and (reasons is None or job.job_id in reasons)]
        reasons = reasons or {}
        if not waiting:
            return ""
        said = sorted({reasons.get(job.job_id) or "no reason given" for job in waiting})
        reason = "; ".join(said)
        due = (self._last_pending_note is None or reason != self._last_reason
               or now - self._last_pending_note >= self.pending_repeat_s)
        if not due:
            return ""
        self._last_pending_note, self._last_reason = now, reason
        longest = max(now - self._pending_since[job.job_id] for job in waiting)
        return (f"slurm: {len(waiting)} job(s) pending for up to {clock(longest)} "
                f"({', '.join(job.job_id for job in waiting)}); Slurm's reason: {reason}")

    def ended_line(self, job: WatchedJob, state: str, outcome: str) -> str:
        """The line of a job that ended: Slurm's final state, ``outcome`` (the record's
        status, or why there is none) and its log."""
        job.ended, job.state, job.outcome = True, plain_state(state), outcome
        word = STATE_WORDS.get(job.state, job.state.lower())
        return f"slurm job {job.job_id} {word} ({outcome}): {job.label}; log {job.log}"

    def summary_line(self) -> str:
        """The closing line: the jobs by Slurm's final state and their records' outcomes."""
        states = Counter(STATE_WORDS.get(job.state, job.state.lower()) for job in self.jobs)
        outcomes = Counter(job.outcome.split(":")[0].removeprefix("record ")
                           for job in self.jobs if job.outcome)
        by_state = ", ".join(f"{count} {word}" for word, count in sorted(states.items()))
        by_outcome = ", ".join(f"{count} {word}" for word, count in sorted(outcomes.items()))
        return f"slurm: {len(self.jobs)} job(s) ended: {by_state} (records: {by_outcome})"
