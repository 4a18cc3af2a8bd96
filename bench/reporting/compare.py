"""Join aggregated cells with the paper's values and judge each cell: the report's long table."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from bench.metrics.fit_health import fit_failed_reason, health_missing_reason
from bench.reporting.aggregate import (
    aggregate_cells,
    cells_frame,
    current_records,
    unattributed_failures,
)
from bench.reporting.catalog import make_target
from bench.reporting.intervals import Range, cell_ranges, clip_interval, range_text
from bench.reporting.spec import UNREADABLE_RECORDS, Anchor, ArtifactSpec
from bench.reporting.targets import PaperValue, paper_values
from bench.reporting.verdicts import (
    FAILED,
    JUDGED,
    MISSING,
    NEEDS_DATA,
    NOT_COMPARABLE,
    Estimate,
    NotMeasurable,
    Verdict,
    judge,
)

COMPARISON_COLUMNS = (
    "artifact", "row", "column", "paper", "ours", "ci_low", "ci_high", "n_seeds", "scale",
    "protocol", "verdict", "ours_paper_seed", "paper_stderr", "n_failed", "seeds", "cause",
    "unit", "n_superseded", "stderr", "value_range", "study",
)
PROTOCOL_ORDER = ("paper", "corrected")
ANCHOR_COLUMNS = ("label", "paper", "ours", "verdict", "cause", "study")
ERROR_CHARS = 160


def swept_protocols(record: dict[str, Any]) -> list[str]:
    """The protocols the record's experiment sweeps at its scale (``config.sweep.protocol``)."""
    sweep = (record.get("config") or {}).get("sweep") or {}
    swept = sweep.get("protocol") if isinstance(sweep, dict) else None
    return [str(p) for p in swept] if isinstance(swept, list) else []


def ordered_protocols(records: Iterable[dict[str, Any]]) -> list[str]:
    """Protocols present in the records or swept by their experiment (a swept protocol without
    records is a gap to show): ``paper`` first, then ``corrected``, then the rest."""
    records = list(records)
    present = {r.get("protocol", "") for r in records}
    present |= {p for r in records for p in swept_protocols(r)}
    known = [p for p in PROTOCOL_ORDER if p in present]
    return known + sorted(present - set(PROTOCOL_ORDER))


def scales_of(records: Iterable[dict[str, Any]]) -> str:
    """The records' scale(s), comma-separated."""
    return ", ".join(sorted({str(r.get("scale", "")) for r in records}))


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 1] + "…"


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _ordered_keys(spec: ArtifactSpec, keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
    rows = list(dict.fromkeys([*spec.row_order, *(row for row, _ in keys)]))
    columns = list(dict.fromkeys([*spec.column_order, *(column for _, column in keys)]))
    return sorted(keys, key=lambda key: (rows.index(key[0]), columns.index(key[1])))


def _gap_verdict(spec: ArtifactSpec, key: tuple[str, str], summary: dict | None,
                 unattributed: list[str]) -> Verdict:
    data_gap = spec.data_gap(*key)
    if data_gap:
        return Verdict(NEEDS_DATA, data_gap)
    if summary is not None and summary["n_failed"]:
        return Verdict(FAILED, f"all {summary['n_failed']} run(s) failed: "
                               f"{_one_line(summary['error'])}")
    if summary is not None:
        return Verdict(MISSING, "the ok records hold no finite value for this cell")
    if unattributed:
        return Verdict(FAILED, f"{len(unattributed)} failed run(s) produced no cells: "
                               f"{_one_line(unattributed[0])}")
    return Verdict(MISSING, f"no ok record; run `make {make_target(spec.paper, spec.artifact)}`")


def _joined(*reasons: str) -> str:
    """Every non-empty reason a cell or anchor is not comparable, in order, joined by "; "."""
    return "; ".join(reason for reason in reasons if reason)


def _comparable(spec: ArtifactSpec, protocol: str, key: tuple[str, str], verdict: Verdict,
                ok_records: list[dict[str, Any]]) -> Verdict:
    """``verdict``, or ``not comparable`` when a judged cell (agrees, close, differs,
    inconclusive) rests
    on a fit that failed (the records' health of its row), on records without health where
    the spec says its task records it (``records_health``), or is declared not comparable
    for these records (the spec's reason)."""
    if verdict.verdict not in JUDGED:
        return verdict
    reason = _joined(fit_failed_reason(ok_records, (key[0],)),
                     health_missing_reason(ok_records, (key[0],)) if spec.records_health else "",
                     spec.not_comparable_reason(protocol, *key, ok_records))
    return Verdict(NOT_COMPARABLE, reason) if reason else verdict


def _cell_line(spec: ArtifactSpec, protocol: str, key: tuple[str, str],
               paper: PaperValue | None, summary: dict | None,
               unattributed: list[str], bounds: Range | None = None,
               ok_records: list[dict[str, Any]] = ()) -> dict[str, Any]:
    row, column = key
    rule = spec.rule_for(protocol, row, column)
    cause = spec.cause_for(protocol, row, column, ok_records)
    nan = math.nan
    stats = summary or {"ours_paper_seed": nan, "mean": nan, "sd": nan, "ci_low": nan,
                        "ci_high": nan,
                        "n_seeds": 0, "n_failed": 0, "seeds": "", "error": "", "n_superseded": 0}
    stats = {**stats}
    stats["ci_low"], stats["ci_high"] = clip_interval(stats["ci_low"], stats["ci_high"], bounds)
    if stats["n_seeds"] == 0:
        verdict = _gap_verdict(spec, key, summary, unattributed)
    else:
        at_seed = stats["ours_paper_seed"]
        ours = at_seed if math.isfinite(at_seed) else stats["mean"]
        stderr = (stats["sd"] / math.sqrt(stats["n_seeds"]) if stats["n_seeds"] > 1
                  else math.nan)
        verdict = judge(rule, paper, ours, (stats["ci_low"], stats["ci_high"]), cause, stderr)
        verdict = _comparable(spec, protocol, key, verdict, list(ok_records))
        if stats["n_failed"]:
            failures = f"{stats['n_failed']} run(s) failed: {_one_line(stats['error'])}"
            verdict = Verdict(verdict.verdict, _join(verdict.cause, failures))
        if unattributed:
            failures = (f"{len(unattributed)} failed run(s) produced no cells: "
                        f"{_one_line(unattributed[0])}")
            verdict = Verdict(verdict.verdict, _join(verdict.cause, failures))
    if paper is not None:
        paper_text = paper.printed
    else:
        paper_text = rule.reference() or ""
    return {
        "artifact": spec.artifact, "row": row, "column": column, "paper": paper_text,
        "ours": stats["mean"], "ci_low": stats["ci_low"], "ci_high": stats["ci_high"],
        "n_seeds": stats["n_seeds"], "protocol": protocol, "verdict": verdict.verdict,
        "ours_paper_seed": stats["ours_paper_seed"],
        "paper_stderr": paper.stderr_printed if paper else "",
        "n_failed": stats["n_failed"] + len(unattributed), "seeds": stats["seeds"],
        "cause": verdict.cause,
        "unit": paper.unit if paper else "", "n_superseded": stats["n_superseded"],
        "stderr": (stats["sd"] / math.sqrt(stats["n_seeds"]) if stats["n_seeds"] > 1
                   else nan),
        "value_range": range_text(bounds),
        "study": spec.is_study(protocol, row),
    }


def _ranges(spec: ArtifactSpec, keys_of: dict[str, list[tuple[str, str]]],
            targets: dict[tuple[str, str], PaperValue],
            summaries: dict[tuple[str, str, str], dict],
            ) -> dict[tuple[str, str, str], Range | None]:
    """Each cell's range (:func:`bench.reporting.intervals.cell_ranges`) from its values and the
    paper's units."""
    units = {key: value.unit for key, value in targets.items() if value.unit}
    units.update({("*", column): value.unit for (_, column), value in targets.items()
                  if value.unit})
    values = {}
    for protocol, keys in keys_of.items():
        for key in keys:
            summary = summaries.get((protocol, *key)) or {}
            values[(protocol, *key)] = [summary.get("mean", math.nan),
                                        summary.get("ours_paper_seed", math.nan)]
    return cell_ranges(spec, values, units)


def targets_of_mapped_rows(spec: ArtifactSpec, targets: dict[tuple[str, str], PaperValue],
                           rows: list[str]) -> dict[tuple[str, str], PaperValue]:
    """The paper values of a spec with ``paper_rows``: each produced row mapped to a paper
    row takes that row's values; the paper's rows themselves are left out."""
    mapped = {}
    for row in dict.fromkeys(rows):
        paper_row = spec.paper_row(row)
        for (target_row, column), value in targets.items():
            if target_row == paper_row:
                mapped[(row, column)] = value
    return mapped


def comparison_table(spec: ArtifactSpec, records: list[dict[str, Any]]) -> pd.DataFrame:
    """The long table of a report: one line per (protocol, row, column), columns
    ``COMPARISON_COLUMNS``.

    Every paper value of the spec's target artifacts appears for every protocol present in
    the records (as ``missing`` or ``failed`` when no ok value exists); cells that only the
    records have appear with ``no paper value`` when ``spec.extra_cells`` is set.
    """
    frame = cells_frame(records, spec.failed_cells)
    summaries = {
        (s["protocol"], s["row"], s["column"]): s
        for s in aggregate_cells(frame, spec.paper_seed).to_dict("records")
    }
    unattributed = unattributed_failures(frame)
    targets = {
        key: value for key, value in paper_values(spec.paper, spec.target_artifacts).items()
        if not spec.is_ignored(*key)
    }
    if spec.paper_rows:
        # The paper's own rows (mapped to themselves) keep their cells without records too,
        # so their gaps show; a variant row appears once it has records.
        own_rows = [row for row in spec.row_order if spec.paper_row(row) == row]
        targets = targets_of_mapped_rows(spec, targets,
                                         [*own_rows, *(row for _, row, _ in summaries)])
    keys_of = {}
    for protocol in ordered_protocols(records):
        produced = [(row, col) for (p, row, col) in summaries if p == protocol]
        extra = [key for key in produced if key not in targets]
        keys_of[protocol] = _ordered_keys(spec, [*targets, *(extra if spec.extra_cells else [])])
    ranges = _ranges(spec, keys_of, targets, summaries)
    current = current_records(records)
    lines = []
    for protocol, keys in keys_of.items():
        ok_records = [r for r in current
                      if r.get("protocol", "") == protocol]
        for key in keys:
            lines.append(_cell_line(spec, protocol, key, targets.get(key),
                                    summaries.get((protocol, *key)),
                                    unattributed.get(protocol, []), ranges[(protocol, *key)],
                                    ok_records))
    table = pd.DataFrame(lines, columns=[c for c in COMPARISON_COLUMNS if c != "scale"])
    table.insert(COMPARISON_COLUMNS.index("scale"), "scale", scales_of(records))
    return table.astype({"study": bool})


def hidden_extra_cells(spec: ArtifactSpec, table: pd.DataFrame,
                       records: list[dict[str, Any]]) -> int:
    """How many record cells without a paper value were left out (``extra_cells=False``)."""
    if spec.extra_cells:
        return 0
    produced = {
        (r.get("protocol"), c["row"], c["column"])
        for r in records if r.get("status") == "ok" for c in r.get("cells") or []
    }
    shown = set(zip(table["protocol"], table["row"], table["column"], strict=True))
    return len(produced - shown)


def anchor_cause(spec: ArtifactSpec, anchor: Anchor, ok_records: list[dict[str, Any]]) -> str:
    """The anchor's own cause computed from the records, else the spec's cause for its label
    (a text, or a function of the same records; "" when neither gives one). A cause function
    that cannot read these records (a missing cell, a zero or absent number) falls back to the
    spec's cause rather than stopping the report; an empty cause is then refused where one is
    required."""
    fallback = spec.cause_for("*", anchor.label, "", ok_records)
    if anchor.cause is None:
        return fallback
    try:
        return anchor.cause(ok_records) or fallback
    except UNREADABLE_RECORDS:
        return fallback


def anchor_table(spec: ArtifactSpec, records: list[dict[str, Any]]) -> pd.DataFrame:
    """One line per anchor of the spec: label, paper, ours, verdict, cause.

    An anchor whose getter finds nothing in the records (LookupError, ValueError or an
    arithmetic error) is ``missing``, with the error as its cause. An anchor that
    ``spec.not_comparable`` declares not comparable for these records (pattern
    ``(label, "")``), or whose fits (``anchor.protocol``, ``anchor.rows``) include one that
    failed its health checks, is ``not comparable`` with the reason as its cause, whether or
    not the getter found a value (a stand-in's ratio is not computed at all). The cause of the
    others is :func:`anchor_cause`, shown unless they agree. An anchor whose ``applies`` says
    no is left out.
    """
    ok_records = current_records(records)
    lines = []
    for anchor in spec.anchors:
        if anchor.applies is not None and not anchor.applies(ok_records):
            continue
        rule = anchor.rule or spec.rule
        paper = PaperValue(spec.artifact, anchor.label, "", anchor.paper)
        try:
            measured = anchor.ours(ok_records)
        except NotMeasurable as err:
            ours, verdict = math.nan, Verdict(NOT_COMPARABLE, f"not measurable: {err}")
        except (LookupError, ValueError, ArithmeticError) as err:
            ours, verdict = math.nan, Verdict(MISSING, _one_line(f"{type(err).__name__}: {err}"))
        else:
            ours = float(measured)
            ci = ((measured.low, measured.high) if isinstance(measured, Estimate)
                  else (math.nan, math.nan))
            verdict = judge(rule, paper, ours, ci, anchor_cause(spec, anchor, ok_records))
        used = [r for r in ok_records
                 if not anchor.protocol or r.get("protocol", "") == anchor.protocol]
        reason = _joined(fit_failed_reason(used, anchor.rows),
                         health_missing_reason(used, anchor.rows) if spec.records_health else "",
                         spec.not_comparable_reason("*", anchor.label, "", ok_records))
        if reason:
            verdict = Verdict(NOT_COMPARABLE, reason)
        lines.append({"label": anchor.label, "paper": anchor.paper, "ours": ours,
                      "verdict": verdict.verdict, "cause": verdict.cause,
                      "study": anchor.study or spec.is_study(anchor.protocol, "")})
    return pd.DataFrame(lines, columns=list(ANCHOR_COLUMNS)).astype({"study": bool})
