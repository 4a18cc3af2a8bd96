"""``reports/timing.md``: wall time per artifact and per method at each scale, from the records.

Each record's ``timings.total_s`` is its job's wall time (including the training of the networks
it was the first to need); the reports' summaries add them up per experiment and per method,
over the records whose values the tables read (a record superseded by a rerun is counted
apart). An experiment read by several reports (SSLA Table 2 and Figure 2) counts once. Beside
the sum: the wall time while the experiment's jobs ran (its parallel workers overlap, the gaps
between runs are left out), the jobs' CPU time, and whether other work shared the cores (a
load above the cores makes wall times overstate the cost); records made before they held CPU
time and load say "not recorded". Reports whose records are not kept here, or that wait for
data, are listed as gaps with the reason. The wall time of ``make reproduce-all`` is the union
of every timed experiment's job spans (experiments that shared the worker queue of
``bench.reproduce --all`` overlap and count once; parts run at different times add up); the
page says how many experiments are not timed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from bench.reporting.files import write_atomically
from bench.reporting.formatting import GAP, markdown_table
from bench.reporting.summary import SHORT_GAP_S, short_gap_seconds, spans_seconds

TIMING_NAME = "timing.md"


def duration_text(seconds: float | None) -> str:
    """``"12.3 s"``, ``"14 min 05 s"``, ``"3 h 36 min"``; ``—`` for None."""
    if seconds is None:
        return GAP
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def experiments(summaries: dict[str, dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (experiment, scale): the timings of the first summary that has them (else the first
    summary), and the reports reading that experiment."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for key, summary in summaries.items():
        ident = (summary.get("experiment") or key, summary.get("scale") or "")
        entry = found.setdefault(ident, {"summary": summary, "reports": []})
        entry["reports"].append(key)
        if entry["summary"].get("timings") is None and summary.get("timings") is not None:
            entry["summary"] = summary
    return found


def gap_reason(summary: dict[str, Any]) -> str:
    """Why a summary has no job times."""
    gaps = summary.get("gaps") or {}
    return gaps.get("timings") or "no timings in the summary"


NOT_RECORDED = "not recorded"


def jobs_text(timings: dict[str, Any]) -> str:
    """The jobs counted, and the superseded records left out."""
    superseded = timings.get("superseded_jobs") or 0
    return f"{timings['jobs']}" + (f" (+{superseded} superseded)" if superseded else "")


def cpu_text(timings: dict[str, Any]) -> str:
    """The jobs' summed CPU time, or why it is not known for some of them."""
    missing = timings.get("jobs_without_cpu", timings["jobs"])
    if missing == timings["jobs"]:
        return NOT_RECORDED
    known = duration_text(timings.get("cpu_seconds"))
    return known if not missing else f"{known} ({missing} jobs {NOT_RECORDED})"


def cores_text(timings: dict[str, Any]) -> str:
    """Whether the jobs ran on quiet cores: how many saw a load above the cores."""
    unknown = timings.get("jobs_without_load", timings["jobs"])
    if unknown == timings["jobs"]:
        return NOT_RECORDED
    shared = timings.get("jobs_on_shared_cores", 0)
    text = f"shared for {shared} of {timings['jobs'] - unknown} jobs" if shared else "quiet"
    return text if not unknown else f"{text} ({unknown} jobs {NOT_RECORDED})"


def busy_text(timings: dict[str, Any]) -> str:
    """The wall time while the jobs ran; a summary rendered before it was kept says so."""
    if "busy_seconds" not in timings:
        return NOT_RECORDED
    return duration_text(timings["busy_seconds"])


def artifact_rows(found: dict[tuple[str, str], dict[str, Any]]) -> pd.DataFrame:
    """One line per (experiment, scale): jobs, summed job and CPU time, the wall time while
    its jobs ran, whether the cores were shared, first start to last finish."""
    lines = []
    for (experiment, scale), entry in found.items():
        summary, timings = entry["summary"], entry["summary"].get("timings")
        records = summary.get("records") or {}
        span = (f"{records.get('first_started', '')[:16]} → {records.get('last_finished', '')[:16]}"
                if timings and records.get("first_started") else GAP)
        lines.append({
            "experiment": experiment, "reports": ", ".join(entry["reports"]),
            "scale": scale or GAP, "jobs": jobs_text(timings) if timings else GAP,
            "job time (sum)": duration_text(timings["job_seconds"]) if timings else GAP,
            "CPU time (sum)": cpu_text(timings) if timings else GAP,
            "wall time while jobs ran": busy_text(timings) if timings else GAP,
            "cores": cores_text(timings) if timings else GAP,
            "first start → last finish": span,
            "gap": "" if timings else gap_reason(summary),
        })
    return pd.DataFrame(lines, columns=["experiment", "reports", "scale", "jobs",
                                        "job time (sum)", "CPU time (sum)",
                                        "wall time while jobs ran", "cores",
                                        "first start → last finish", "gap"])


def method_rows(found: dict[tuple[str, str], dict[str, Any]]) -> pd.DataFrame:
    """One line per (experiment, scale, method) with records: jobs, time, share."""
    lines = []
    for (experiment, scale), entry in found.items():
        timings = entry["summary"].get("timings")
        if not timings:
            continue
        for method in timings["methods"]:
            share = method["job_seconds"] / timings["job_seconds"] if timings["job_seconds"] else 0
            lines.append({"experiment": experiment, "scale": scale, "method": method["method"],
                          "jobs": str(method["jobs"]),
                          "job time": duration_text(method["job_seconds"]),
                          "share": f"{100 * share:.0f}%"})
    return pd.DataFrame(lines, columns=["experiment", "scale", "method", "jobs", "job time",
                                        "share"])


def _untimed_reason(found: dict[tuple[str, str], dict[str, Any]], experiment: str,
                    scale: str) -> str:
    if (experiment, scale) in found:
        return gap_reason(found[(experiment, scale)]["summary"])
    others = [(s, entry) for (e, s), entry in found.items() if e == experiment]
    if not others:
        return "no report"
    other_scale, entry = others[0]
    if not other_scale:
        return gap_reason(entry["summary"])
    return f"its report is at {other_scale} scale"


def reproduce_all_lines(found: dict[tuple[str, str], dict[str, Any]],
                        implemented: Iterable[str], scale: str = "cpu") -> list[str]:
    """The total of ``make reproduce-all SCALE=<scale>`` over the timed experiments, and the
    experiments it leaves out with the reason."""
    timed, busy, n_timed, unknown_cores, shared, no_busy = 0.0, 0.0, 0, [], [], []
    spans: list[list[str]] = []
    untimed: dict[str, list[str]] = {}
    for experiment in dict.fromkeys(implemented):
        entry = found.get((experiment, scale))
        timings = entry["summary"].get("timings") if entry else None
        if timings:
            timed += timings["job_seconds"]
            if timings.get("busy_seconds") is None:
                busy += timings["job_seconds"]
                no_busy.append(experiment)
            elif timings.get("busy_spans"):
                spans += timings["busy_spans"]
            else:
                busy += timings["busy_seconds"]
            n_timed += 1
            if timings.get("jobs_on_shared_cores"):
                shared.append(experiment)
            elif timings.get("jobs_without_load", timings["jobs"]):
                unknown_cores.append(experiment)
        else:
            untimed.setdefault(_untimed_reason(found, experiment, scale), []).append(experiment)
    busy += spans_seconds(spans)
    between_jobs = short_gap_seconds(spans)
    n_untimed = sum(len(names) for names in untimed.values())
    total = n_untimed + n_timed
    head = (f"Sum of the job times of the {n_timed} of {total} experiments with {scale}-scale "
            f"records here: **{duration_text(timed)}** (one worker). Wall time while their jobs "
            f"ran: **{duration_text(busy)}**: the wall time of `make reproduce-all` if each ran "
            "as it did here (the union of the jobs' start-to-finish spans over all experiments: "
            "experiments that shared one worker queue, `bench.reproduce --all`, count their "
            "overlap once; parts run at different times add up).")
    if between_jobs:
        head += (f" The seconds between one job's end and the next one's start within a run "
                 f"(gaps under {SHORT_GAP_S:.0f} s: a multirun's start-up, a report's "
                 f"rendering) are not in that union: {duration_text(between_jobs)} here, so "
                 f"about **{duration_text(busy + between_jobs)}** with them.")
    if no_busy:
        head += (f" Summaries rendered before they kept the wall time count their job time "
                 f"instead: "
                 f"{', '.join(no_busy)}.")
    if shared:
        head += (f" Measured while other work shared the cores, so longer than on quiet "
                 f"cores: {', '.join(shared)}.")
    if unknown_cores:
        head += (f" Records made before jobs recorded their CPU time and the load "
                 f"({len(unknown_cores)} experiments) cannot say whether the cores were shared.")
    if not untimed:
        return [head, ""]
    head += (f" The other {n_untimed} are not timed, so the total of `make reproduce-all "
             f"SCALE={scale}` is not known; it is at least this sum. Not timed:")
    return [head, "", *(f"- {reason}: {', '.join(names)}" for reason, names in untimed.items()),
            ""]


def timing_markdown(summaries: dict[str, dict[str, Any]], implemented: Iterable[str]) -> str:
    """The timing page; ``implemented`` are the experiments ``make reproduce-all`` runs."""
    found = experiments(summaries)
    return "\n".join([
        "# Timing", "",
        "Wall time of the jobs behind each report, from its records (each record's "
        "`timings.total_s`, which includes training the networks the job was first to need; "
        "records superseded by a rerun are counted apart), read from the reports' "
        "`<artifact>.summary.json`. 'wall time while jobs ran' is the union of the jobs' "
        "start-to-finish spans; 'cores' says whether the 1-minute load exceeded the cores "
        "during a job. Generated by `python -m bench.report --index`; a gap says why a time "
        "is not known.", "",
        "## Per artifact", "", markdown_table(artifact_rows(found)), "",
        "## Per method", "", markdown_table(method_rows(found)), "",
        "## make reproduce-all SCALE=cpu", "", *reproduce_all_lines(found, implemented),
    ])


def write_timing(out_dir: Path, summaries: dict[str, dict[str, Any]],
                 implemented: Iterable[str]) -> Path:
    """Rewrite ``<out_dir>/timing.md``; returns its path."""
    return write_atomically(Path(out_dir) / TIMING_NAME, timing_markdown(summaries, implemented))
