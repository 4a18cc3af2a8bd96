"""The machine-readable summary beside each report: ``<artifact>.summary.json``.

It holds the verdict counts per protocol, every anchor (the paper's claims), the paper numbers
the report does not confirm, the scale, the records' dates and git shas, and the job times per
method. The scoreboard (``reports/README.md``), ``reports/FINDINGS.md`` and
``reports/timing.md`` read only these files, so they cover every committed report, including
those rendered before the summaries existed (backfilled once from their CSV and Markdown by
:mod:`bench.reporting.backfill`, which says so in the file). Unknown values are ``null`` with
the reason in ``gaps``; nothing is estimated.

Schema version 2 added the verdict ``not comparable`` and the cause rule: under the paper's
protocol every ``differs`` or ``close`` (a cell or a claim) has a cause. A report is not
rendered against the rule (:func:`require_causes`), and the index refuses a summary of
version 2 or later that breaks it; a summary of version 1, or one backfilled from a report
rendered before summaries existed, predates the rule: its causeless verdicts are counted in
FINDINGS.md as a gap (:func:`causeless_verdicts`), not refused. Smoke-scale reports check the
plumbing, not the paper, and are exempt.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from bench.reporting.catalog import make_target
from bench.reporting.compare import ordered_protocols, scales_of
from bench.reporting.files import SUMMARY_SUFFIX, write_atomically
from bench.reporting.markdown import ANCHORS_HEADING, cells_heading, heading_slug
from bench.reporting.spec import ArtifactSpec
from bench.reporting.verdicts import CAUSE_REQUIRED, NEEDS_DATA, UNCONFIRMED, VERDICTS

SCHEMA_VERSION = 3
# Summaries from this schema on were judged under the verdict rules of bench.reporting.verdicts
# (fit health, counts, ratio floors, the standard-error deferral, study rows counted apart).
VERDICT_RULES_SINCE = 3
CAUSES_REQUIRED_SINCE = 2
NO_PROTOCOL = ""
PAPER_PROTOCOLS = ("paper", NO_PROTOCOL)
# Smoke runs check the plumbing on a few points; their differences from the paper are
# expected and never reported, so they need no cause.
UNJUDGED_SCALES = ("smoke",)
CAUSELESS_LISTED = 8


class MissingCause(ValueError):
    """A report or summary under the cause rule has a differs / close without a cause."""


def finite_or_none(value: Any) -> float | None:
    """A finite float, else None (JSON has no NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def verdict_counts(verdicts: Any) -> dict[str, int]:
    """Count of every verdict of :data:`VERDICTS` (zeros included, in that order)."""
    counts = Counter(str(v) for v in verdicts)
    return {verdict: int(counts.get(verdict, 0)) for verdict in VERDICTS}


def report_link(paper: str, artifact: str, heading: str) -> str:
    """Link from ``reports/`` to a section of a report: ``ssla/table-2.md#anchors``."""
    return f"{paper}/{artifact}.md#{heading_slug(heading)}"


def judged_value(line: dict[str, Any]) -> float | None:
    """The value a verdict judged: the paper seed's when there is one, else the mean."""
    at_seed = finite_or_none(line.get("ours_paper_seed"))
    return at_seed if at_seed is not None else finite_or_none(line.get("ours"))


def unconfirmed_cells(table: pd.DataFrame, link_of: Any) -> list[dict[str, Any]]:
    """Cells with a paper value whose verdict is not ``agrees``; ``link_of(protocol)`` gives
    the link of their table."""
    cells = []
    for line in table.to_dict("records"):
        paper = str(line.get("paper") or "")
        if not paper or paper == "—" or line["verdict"] not in UNCONFIRMED:
            continue
        protocol = str(line.get("protocol") or NO_PROTOCOL)
        cells.append({"protocol": protocol, "row": str(line["row"]),
                      "column": str(line["column"]), "paper": paper,
                      "ours": judged_value(line), "verdict": line["verdict"],
                      "cause": str(line.get("cause") or ""), "unit": str(line.get("unit") or ""),
                      "link": link_of(protocol), "study": bool(line.get("study", False))})
    return cells


def anchor_entries(anchors: pd.DataFrame, link: str) -> list[dict[str, Any]]:
    """Every anchor as a plain dict: label, paper, ours, verdict, cause, link."""
    return [{"label": str(line["label"]), "paper": str(line["paper"]),
             "ours": finite_or_none(line.get("ours")), "verdict": str(line["verdict"]),
             "cause": str(line.get("cause") or ""), "link": link,
             "study": bool(line.get("study", False))}
            for line in anchors.to_dict("records")]


def record_facts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts, dates and git shas of the records a report was rendered from."""
    ok = sum(r.get("status") == "ok" for r in records)
    started = sorted(str(r["started_at"]) for r in records if r.get("started_at"))
    finished = sorted(str(r["finished_at"]) for r in records if r.get("finished_at"))
    return {"total": len(records), "ok": ok, "failed": len(records) - ok,
            "first_started": started[0] if started else None,
            "last_finished": finished[-1] if finished else None,
            "git_shas": sorted({str(r.get("git_sha", ""))[:12] for r in records} - {""}),
            "uncommitted_changes": any(bool(r.get("git_dirty")) for r in records)}


def superseded_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ok records none of whose cells the tables read: for its seed and protocol, a later
    ok record holds every (row, column) it has (a rerun under a changed config; the tables use
    the latest value, :func:`bench.reporting.aggregate.aggregate_cells`)."""
    ok = sorted((r for r in records if r.get("status") == "ok" and r.get("cells")),
                key=lambda r: str(r.get("finished_at") or ""))
    later: dict[tuple[Any, Any, Any, Any], int] = {}
    for index, record in enumerate(ok):
        for cell in record["cells"]:
            key = (record.get("seed"), record.get("protocol"), cell.get("row"), cell.get("column"))
            later[key] = index
    return [record for index, record in enumerate(ok)
            if all(later[(record.get("seed"), record.get("protocol"), cell.get("row"),
                          cell.get("column"))] > index for cell in record["cells"])]


def _record_spans(records: Iterable[dict[str, Any]]) -> list[tuple[datetime, datetime]]:
    """``records``' ``started_at`` → ``finished_at`` spans merged (:func:`merged_spans`);
    records without both times left out."""
    spans = []
    for record in records:
        try:
            start = datetime.fromisoformat(str(record["started_at"]))
            end = datetime.fromisoformat(str(record["finished_at"]))
        except (KeyError, TypeError, ValueError):
            continue
        spans.append((start, end))
    return merged_spans(spans)


def busy_spans(records: Iterable[dict[str, Any]]) -> list[list[str]]:
    """The union of ``records``' ``started_at`` → ``finished_at`` spans as disjoint
    ``[start, end]`` ISO times in order (records without both times left out)."""
    return [[start.isoformat(), end.isoformat()] for start, end in _record_spans(records)]


def merged_spans(spans: Iterable[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Overlapping or touching ``(start, end)`` spans joined, in order."""
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _merged_iso_spans(spans: Iterable[Iterable[str]]) -> list[tuple[datetime, datetime]]:
    """``[start, end]`` ISO spans parsed and merged (:func:`merged_spans`)."""
    return merged_spans(tuple(datetime.fromisoformat(str(moment)) for moment in span)
                        for span in spans)


def _covered_seconds(merged: list[tuple[datetime, datetime]]) -> float:
    """Seconds covered by disjoint ``(start, end)`` spans."""
    return round(sum((end - start).total_seconds() for start, end in merged), 3)


def spans_seconds(spans: Iterable[Iterable[str]]) -> float:
    """Seconds covered by ``[start, end]`` ISO spans (overlaps counted once)."""
    return _covered_seconds(_merged_iso_spans(spans))


# Between one job's end and the next one's start inside one run: a multirun's process start-up,
# a report rendered before the next experiment's jobs. Longer gaps are runs at other times.
SHORT_GAP_S = 60.0


def short_gap_seconds(spans: Iterable[Iterable[str]], limit_s: float = SHORT_GAP_S) -> float:
    """Seconds between consecutive merged ``[start, end]`` ISO spans where no job ran, summed
    over the gaps shorter than ``limit_s``: the part of a run's wall time the union of its
    jobs' spans leaves out."""
    merged = _merged_iso_spans(spans)
    gaps = ((later[0] - earlier[1]).total_seconds()
            for earlier, later in zip(merged, merged[1:], strict=False))
    return round(sum(gap for gap in gaps if gap < limit_s), 3)


def busy_seconds(records: Iterable[dict[str, Any]]) -> float | None:
    """Seconds during which at least one of ``records``' jobs ran (the union of their
    ``started_at`` → ``finished_at`` spans, :func:`busy_spans`): the wall time of the run that
    made them, with the gaps between its parts left out; None when no record has both times."""
    spans = _record_spans(records)
    return _covered_seconds(spans) if spans else None


# A job measured while more runnable processes than cores waited: its wall time overstates
# what it costs on quiet cores (half a process of slack for the load average's lag).
SHARED_CORES_SLACK = 0.5


def on_shared_cores(record: dict[str, Any]) -> bool | None:
    """Whether the 1-minute load exceeded the cores at the job's start or end; None for a
    record made before records held ``machine_load``."""
    moments = (record.get("machine_load") or {}).values()
    loads = [m for m in moments if isinstance(m, dict) and m.get("load_1m") is not None]
    if not loads:
        return None
    return any(m["load_1m"] > m.get("cores", 1) + SHARED_CORES_SLACK for m in loads)


def job_times(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Wall time of the jobs whose values the tables read (each record's ``timings.total_s``),
    in all and per method; the superseded records (:func:`superseded_records`) are counted
    apart, not added. Also the jobs' CPU seconds where records hold them, the wall time while
    jobs ran (:func:`busy_seconds`), and how many were measured on shared cores."""
    superseded = {id(record) for record in superseded_records(records)}
    counted = [record for record in records if id(record) not in superseded]
    per_method: dict[str, list[float]] = {}
    untimed = 0
    cpu = [finite_or_none((r.get("timings") or {}).get("cpu_s")) for r in counted]
    shared = [on_shared_cores(record) for record in counted]
    for record in counted:
        seconds = finite_or_none((record.get("timings") or {}).get("total_s"))
        if seconds is None:
            untimed += 1
            continue
        per_method.setdefault(str(record.get("method") or "?"), []).append(seconds)
    methods = [{"method": method, "jobs": len(times), "job_seconds": round(sum(times), 3)}
               for method, times in per_method.items()]
    methods.sort(key=lambda entry: -entry["job_seconds"])
    return {"jobs": len(counted), "jobs_untimed": untimed,
            "job_seconds": round(sum(entry["job_seconds"] for entry in methods), 3),
            "methods": methods, "superseded_jobs": len(superseded),
            "busy_seconds": busy_seconds(counted), "busy_spans": busy_spans(counted),
            "cpu_seconds": round(sum(v for v in cpu if v is not None), 3),
            "jobs_without_cpu": sum(v is None for v in cpu),
            "jobs_on_shared_cores": sum(flag is True for flag in shared),
            "jobs_without_load": sum(flag is None for flag in shared)}


def _base(spec: ArtifactSpec, source: str) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "paper": spec.paper, "artifact": spec.artifact,
            "title": spec.title, "experiment": spec.experiment, "source": source}


def rendered_summary(spec: ArtifactSpec, table: pd.DataFrame, anchors: pd.DataFrame,
                     records: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of a report rendered from ``records``."""
    protocols = ordered_protocols(records)
    counts = {p: verdict_counts(table.loc[(table["protocol"] == p) & ~table["study"], "verdict"])
              for p in protocols}
    study_counts = {p: verdict_counts(table.loc[(table["protocol"] == p) & table["study"],
                                                "verdict"]) for p in protocols}
    return {
        **_base(spec, "rendered"), "status": "records", "scale": scales_of(records),
        "protocols": protocols, "counts": counts, "study_counts": study_counts,
        "anchor_counts": verdict_counts(anchors.loc[~anchors["study"], "verdict"]),
        "study_anchor_counts": verdict_counts(anchors.loc[anchors["study"], "verdict"]),
        "anchors": anchor_entries(anchors, report_link(spec.paper, spec.artifact,
                                                       ANCHORS_HEADING)),
        "unconfirmed_cells": unconfirmed_cells(
            table, lambda p: report_link(spec.paper, spec.artifact, cells_heading(p))),
        "records": record_facts(records), "timings": job_times(records), "gaps": {},
    }


def needs_data_summary(spec: ArtifactSpec, table: pd.DataFrame, anchors: pd.DataFrame,
                       missing: list[str], headings: tuple[str, str]) -> dict[str, Any]:
    """The summary of a "needs data" report: every paper cell and anchor waits for records;
    ``missing`` names the files; ``headings`` are the report's cell and anchor headings."""
    cause = "; ".join(missing)
    cells = table.assign(protocol=NO_PROTOCOL, cause=cause)
    anchors = anchors.assign(cause=cause, ours=math.nan)
    reason = "no records: the data are not on this machine"
    return {
        **_base(spec, "rendered"), "status": NEEDS_DATA, "scale": None, "protocols": [],
        "counts": {NO_PROTOCOL: verdict_counts(cells["verdict"])},
        "anchor_counts": verdict_counts(anchors["verdict"]),
        "anchors": anchor_entries(anchors, report_link(spec.paper, spec.artifact,
                                                       headings[1])),
        "unconfirmed_cells": unconfirmed_cells(
            cells, lambda _: report_link(spec.paper, spec.artifact, headings[0])),
        "records": None, "timings": None, "gaps": {"records": reason, "timings": reason},
    }


def under_verdict_rules(summary: dict[str, Any]) -> bool:
    """Whether a summary's verdicts were judged under the current verdict rules (schema
    ``VERDICT_RULES_SINCE`` or later)."""
    return int(summary.get("schema_version") or 1) >= VERDICT_RULES_SINCE


def under_cause_rule(summary: dict[str, Any]) -> bool:
    """Whether a summary was written under the cause rule: rendered (not backfilled) with
    schema version 2 or later."""
    return (summary.get("source") == "rendered"
            and int(summary.get("schema_version") or 1) >= CAUSES_REQUIRED_SINCE)


# The failure notes bench.reporting.compare appends to a cell's cause ("2 run(s) failed: ...",
# "1 failed run(s) produced no cells: ..."): they report gaps, they do not explain a verdict.
FAILURE_NOTE = re.compile(r"(?:^|; )\d+ (?:run\(s\) failed|failed run\(s\) produced no cells): .*$")


def explaining_cause(cause: Any) -> str:
    """A cell's cause without the failure notes appended to it ("" when only they remain)."""
    return FAILURE_NOTE.sub("", str(cause or "")).strip()


def causeless_verdicts(summary: dict[str, Any]) -> list[str]:
    """The ``differs`` / ``close`` verdicts without a cause under the paper's protocol, each as
    ``"row column (verdict)"`` or ``"claim 'label' (verdict)"``: cells of the protocol
    ``paper`` (or of none), and the claims when the records include that protocol. Empty at
    smoke scale (:data:`UNJUDGED_SCALES`)."""
    if summary.get("scale") in UNJUDGED_SCALES:
        return []
    found = [f"{cell['row']} {cell['column']} ({cell['verdict']})"
             for cell in summary.get("unconfirmed_cells") or []
             if cell["verdict"] in CAUSE_REQUIRED and cell["protocol"] in PAPER_PROTOCOLS
             and not explaining_cause(cell.get("cause"))]
    protocols = summary.get("protocols") or [NO_PROTOCOL]
    if any(protocol in PAPER_PROTOCOLS for protocol in protocols):
        found += [f"claim '{anchor['label']}' ({anchor['verdict']})"
                  for anchor in summary.get("anchors") or []
                  if anchor["verdict"] in CAUSE_REQUIRED
                  and not str(anchor.get("cause") or "").strip()]
    return found


def causeless_message(summary: dict[str, Any]) -> str:
    """One line: the artifact, how many differs / close lack a cause, the first
    :data:`CAUSELESS_LISTED` of them, and how to fix it ("" when none does)."""
    found = causeless_verdicts(summary)
    if not found:
        return ""
    listed = "; ".join(found[:CAUSELESS_LISTED])
    more = f"; and {len(found) - CAUSELESS_LISTED} more" if len(found) > CAUSELESS_LISTED else ""
    target = make_target(summary["paper"], summary["artifact"])
    return (f"{summary['paper']}/{summary['artifact']}: {len(found)} differs/close under the "
            f"paper protocol without a cause: {listed}{more}; give each a cause naming its "
            f"evidence in the report spec (causes, or the anchor's cause), then `make {target}`")


def require_causes(summaries: Iterable[dict[str, Any]]) -> None:
    """Raise :class:`MissingCause` (one line naming every offending artifact and its
    verdicts) when a summary under the cause rule has a differs / close without a cause."""
    messages = [causeless_message(s) for s in summaries if under_cause_rule(s)]
    messages = [message for message in messages if message]
    if messages:
        raise MissingCause(" | ".join(messages))


def report_csv(path: Path) -> Path:
    """The CSV a summary describes: ``<artifact>.summary.json`` -> ``<artifact>.csv``."""
    path = Path(path)
    return path.with_name(path.name[: -len(SUMMARY_SUFFIX)] + ".csv")


def file_digest(path: Path) -> str | None:
    """sha256 of a file's bytes (None when it does not exist)."""
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def write_summary(path: Path, summary: dict[str, Any]) -> Path:
    """Write one summary as indented JSON (atomically), stamped with the sha256 of the CSV
    beside it, so a report re-rendered without its summary is noticed (:func:`is_current`)."""
    stamped = {**summary, "report_csv_sha256": file_digest(report_csv(path))}
    return write_atomically(Path(path), json.dumps(stamped, indent=1, ensure_ascii=False) + "\n")


def is_current(path: Path) -> bool:
    """Whether the summary at ``path`` exists and describes the CSV now beside it."""
    path = Path(path)
    if not path.is_file():
        return False
    stamp = read_summary_file(path).get("report_csv_sha256")
    return stamp is not None and stamp == file_digest(report_csv(path))


class DamagedSummary(ValueError):
    """A summary file that cannot be read back (cut short, edited, not JSON)."""


def read_summary_file(path: Path) -> dict[str, Any]:
    """One summary; :class:`DamagedSummary` (one line naming the file and how to redo it) when
    it is not a JSON object with its paper and artifact."""
    try:
        summary = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        reason = " ".join(str(err).split())[:120]
        raise DamagedSummary(f"{path}: damaged summary ({type(err).__name__}: {reason}); "
                             "re-render its report with python -m bench.report "
                             "<paper>/<artifact>, or delete the file") from None
    if not isinstance(summary, dict) or not {"paper", "artifact"} <= set(summary):
        raise DamagedSummary(f"{path}: damaged summary (no paper and artifact); re-render its "
                             "report with python -m bench.report <paper>/<artifact>, or "
                             "delete the file")
    return summary


def read_summaries(out_dir: Path) -> dict[str, dict[str, Any]]:
    """Every ``<paper>/<artifact>.summary.json`` under ``out_dir``, keyed by
    ``<paper>/<artifact>``."""
    found = {}
    for path in sorted(Path(out_dir).glob(f"*/*{SUMMARY_SUFFIX}")):
        summary = read_summary_file(path)
        found[f"{summary['paper']}/{summary['artifact']}"] = summary
    return found


def total_counts(summary: dict[str, Any], protocol: str | None = None) -> dict[str, int]:
    """Verdict counts of a summary's cells (one protocol, or all) plus, for the first protocol
    or all, its anchors."""
    protocols = list(summary.get("counts", {}))
    chosen = protocols if protocol is None else [protocol]
    totals = Counter()
    for name in chosen:
        totals.update(summary["counts"].get(name, {}))
    if protocol is None or (protocols and protocol == protocols[0]):
        totals.update(summary.get("anchor_counts") or {})
    return {verdict: int(totals.get(verdict, 0)) for verdict in VERDICTS}


