"""The Markdown report: figure, claims, compact tables, notes, then the long table.

Layout (top to bottom): title and header line; the figure (when the spec draws one); the
anchors (the paper's claims); per protocol a compact table (:mod:`bench.reporting.pivot`); the
notes; per protocol the long cell-by-cell table (also in the CSV). Every table is preceded by
its verdict rule on one line.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pandas as pd

from bench.reporting.compare import hidden_extra_cells, ordered_protocols, scales_of
from bench.reporting.formatting import (
    GAP,
    format_mean_ci,
    format_mean_stderr,
    format_number,
    markdown_table,
)
from bench.reporting.intervals import CI_RULE
from bench.reporting.pivot import pivot_table
from bench.reporting.spec import ArtifactSpec, matching_pattern
from bench.reporting.verdicts import NOT_COMPARABLE

ANCHORS_HEADING = "Anchors"


def compact_heading(protocol: str) -> str:
    """Heading of a protocol's compact table."""
    return f"Compact table (protocol {protocol})"


def cells_heading(protocol: str) -> str:
    """Heading of a protocol's long cell-by-cell table."""
    return f"All cells (protocol {protocol})"


def heading_slug(heading: str) -> str:
    """The fragment a Markdown viewer (GitHub) gives a heading: ``"All cells (protocol
    paper)"`` -> ``"all-cells-protocol-paper"``."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def _unique(values: list[Any]) -> list[str]:
    return sorted({str(v) for v in values if v not in (None, "")})


def record_dates(records: list[dict[str, Any]]) -> tuple[str, str]:
    """First and last ``finished_at`` day of the records (``""`` when none says)."""
    days = _unique([str(r.get("finished_at") or "")[:10] for r in records])
    return (days[0], days[-1]) if days else ("", "")


def header_line(spec: ArtifactSpec, records: list[dict[str, Any]]) -> str:
    """Scale, protocols, seeds, record counts and dates, git sha(s) and torch version(s)."""
    statuses = Counter(r.get("status", "failed") for r in records)
    seeds = sorted({int(r["seed"]) for r in records if r.get("seed") is not None})
    paper_seed = (f"paper seed {spec.paper_seed}" if spec.paper_seed is not None
                  else "no paper seed: the mean over seeds is judged")
    shas = [str(r.get("git_sha", ""))[:12] for r in records]
    dirty = " (uncommitted changes)" if any(r.get("git_dirty") for r in records) else ""
    torch = _unique([(r.get("versions") or {}).get("torch") for r in records])
    first, last = record_dates(records)
    dates = (first if first == last else f"{first} to {last}") or "unknown"
    parts = [
        f"Scale: {scales_of(records)}",
        f"Protocols: {', '.join(ordered_protocols(records))}",
        f"Seeds: {', '.join(map(str, seeds))} ({paper_seed})",
        f"Records: {len(records)} ({statuses.get('ok', 0)} ok, "
        f"{len(records) - statuses.get('ok', 0)} failed), finished {dates}",
        f"Git: {', '.join(_unique(shas)) or 'unknown'}{dirty}",
        f"torch: {', '.join(torch) or 'unknown'}",
    ]
    return " · ".join(parts)


def display_frame(spec: ArtifactSpec, table: pd.DataFrame) -> pd.DataFrame:
    """The human-readable long table of one protocol: formatted numbers, gaps as ``—``."""
    def paper_text(line: pd.Series) -> str:
        if not line["paper"]:
            return GAP
        if not line["paper_stderr"]:
            return line["paper"]
        return f"{line['paper']} ± {line['paper_stderr']}"

    def count_text(line: pd.Series) -> str:
        failed = f" +{line['n_failed']} failed" if line["n_failed"] else ""
        return f"{line['n_seeds']}{failed}"

    columns: dict[str, list[str]] = {
        "row": table["row"].tolist(),
        "column": table["column"].tolist(),
        "paper": [paper_text(line) for _, line in table.iterrows()],
    }
    if spec.paper_seed is not None:
        columns[f"ours (seed {spec.paper_seed})"] = [
            format_number(v) for v in table["ours_paper_seed"]
        ]
    if spec.spread == "stderr":
        columns["ours mean ± SE"] = [
            format_mean_stderr(m, se) for m, se in zip(table["ours"], table["stderr"], strict=True)
        ]
    else:
        columns["ours mean [95% CI]"] = [
            format_mean_ci(m, lo, hi)
            for m, lo, hi in zip(table["ours"], table["ci_low"], table["ci_high"], strict=True)
        ]
    columns["n"] = [count_text(line) for _, line in table.iterrows()]
    columns["verdict"] = table["verdict"].tolist()
    columns["cause"] = table["cause"].tolist()
    return pd.DataFrame(columns)


def shown_part(spec: ArtifactSpec, table: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """The lines of one protocol that the Markdown / LaTeX tables show (``spec.table_cells``)."""
    part = table[table["protocol"] == protocol]
    shown = [spec.is_shown(row, column) for row, column in zip(part["row"], part["column"],
                                                                strict=True)]
    return part[shown] if len(part) else part


def verdict_summary(verdicts: pd.Series) -> str:
    """``"48 agrees, 36 no paper value"``: the verdicts of a table, most frequent first."""
    counts = Counter(verdicts)
    return ", ".join(f"{n} {verdict}" for verdict, n in counts.most_common())


def cell_rule_line(spec: ArtifactSpec, part: pd.DataFrame, protocol: str) -> str:
    """The verdict rule(s) judging one protocol's cells, with the CI rule, on one line; cells
    that are ``not comparable`` are judged by no rule and named apart."""
    groups: dict[str, dict[str, None]] = {}
    not_comparable = part["verdict"] == NOT_COMPARABLE
    for row, column in zip(part["row"][~not_comparable], part["column"][~not_comparable],
                           strict=True):
        pattern = matching_pattern(spec.rules, protocol, row, column)
        rule = spec.rule if pattern is None else spec.rules[pattern]
        groups.setdefault(rule.describe(), {})["/".join(pattern) if pattern else ""] = None
    pieces = []
    for text, labels in sorted(groups.items(), key=lambda item: "" in item[1]):
        named = [label for label in labels if label]
        if len(groups) == 1 and not named and not not_comparable.any():
            pieces.append(text)
        else:
            where = ", ".join(named + (["other cells"] if "" in labels else []))
            pieces.append(f"cells {where}: {text}" if named else f"other cells: {text}")
    if not_comparable.any():
        cells = ", ".join(f"{row} {column}" for row, column in
                          zip(part["row"][not_comparable], part["column"][not_comparable],
                              strict=True))
        pieces.append(f"cells {cells}: {NOT_COMPARABLE}, judged by no rule (the cause says "
                      "why)")
    line = f"Verdict rule: {'; '.join(pieces)}."
    ranges = sorted({r for r in part.get("value_range", pd.Series(dtype=str)) if r})
    if spec.spread == "ci95" and ranges:
        line += f" {CI_RULE}: {', '.join(ranges)}."
    return line


def anchor_rules(spec: ArtifactSpec, labels: list[str]) -> tuple[str, list[str]]:
    """The verdict-rule line of the anchors shown (``labels``: those whose ``applies`` let
    them in) and, when they use several rules, each shown anchor's letter."""
    rule_of = {anchor.label: (anchor.rule or spec.rule).describe() for anchor in spec.anchors}
    texts = [rule_of[label] for label in labels]
    distinct = list(dict.fromkeys(texts))
    if len(distinct) <= 1:
        return (f"Verdict rule: {distinct[0]}." if distinct else ""), []
    letters = [chr(ord("a") + distinct.index(text)) for text in texts]
    listed = "; ".join(f"({chr(ord('a') + i)}) {text}" for i, text in enumerate(distinct))
    return f"Verdict rules (column rule): {listed}.", letters


def anchors_section(spec: ArtifactSpec, anchors: pd.DataFrame) -> list[str]:
    """The claims table with its rule line and verdict counts."""
    if not len(anchors):
        return []
    rule_line, letters = anchor_rules(spec, list(anchors["label"]))
    shown = anchors.drop(columns=["study"], errors="ignore").assign(
        ours=[format_number(v) for v in anchors["ours"]])
    if letters:
        shown = shown.assign(rule=letters)
    return [f"## {ANCHORS_HEADING}", "", rule_line,
            f"Verdicts: {verdict_summary(anchors['verdict'])}.", "", markdown_table(shown), ""]


def compact_section(spec: ArtifactSpec, part: pd.DataFrame, protocol: str) -> list[str]:
    """One protocol's compact table, preceded by its rule line and its verdict counts."""
    lines = [f"## {compact_heading(protocol)}", ""]
    if part.empty:
        return lines + ["_No table cells: the paper prints no numbers for this artifact._", ""]
    pivot = pivot_table(part)
    return lines + [cell_rule_line(spec, part, protocol),
                    f"Verdicts: {verdict_summary(part['verdict'])}. {pivot.description}", "",
                    markdown_table(pivot.frame), ""]


def cells_section(spec: ArtifactSpec, part: pd.DataFrame, protocol: str) -> list[str]:
    """One protocol's long cell-by-cell table, preceded by its rule line."""
    if part.empty:
        return []
    return [f"## {cells_heading(protocol)}", "", cell_rule_line(spec, part, protocol), "",
            markdown_table(display_frame(spec, part)), ""]


def rows_without_records(spec: ArtifactSpec, records: list[dict[str, Any]]) -> list[str]:
    """The spec's named rows (``row_order``, patterns left out) that no record has a cell of,
    when some record has cells at all."""
    produced = {cell["row"] for record in records for cell in record.get("cells") or []}
    if not produced:
        return []
    return [row for row in spec.row_order
            if not any(ch in row for ch in "*?[") and row not in produced]


def report_notes(spec: ArtifactSpec, table: pd.DataFrame,
                 records: list[dict[str, Any]]) -> list[str]:
    """The spec's notes followed by how to read the tables and what they leave out."""
    notes = list(spec.notes)
    notes.append(
        f"Paper values: bench/targets/{spec.paper}.csv ({', '.join(spec.target_artifacts)}); "
        "a ± is as printed, which is not always a standard error (see the CSV's note)."
    )
    spread = ("ours mean ± SE: mean over seeds ± standard error sd/√k; no SE with one seed."
              if spec.spread == "stderr" else
              "ours mean [95% CI]: mean over seeds and Student-t interval "
              "mean ± t(0.975, k-1)·sd/√k, cut at the range of a proportion (its true mean "
              "lies in the range, so the cut interval keeps the t-interval's coverage); no "
              "interval with one seed.")
    notes.append(f"{spread} n: seeds with an ok value (+ failed runs). — marks a value we do "
                 "not have; the verdict says why. Integer values print as integers.")
    not_shown = sum(not spec.is_shown(row, column)
                    for row, column in zip(table["row"], table["column"], strict=True))
    if not_shown:
        notes.append(f"{not_shown} cell line(s) are in the CSV only (the tables show "
                     f"{', '.join('/'.join(p) for p in spec.table_cells)}).")
    hidden = hidden_extra_cells(spec, table, records)
    if hidden:
        notes.append(f"{hidden} reproduced cell(s) without a paper value are not shown.")
    absent = rows_without_records(spec, records)
    if absent:
        notes.append(f"Rows without records: {', '.join(absent)} (their jobs have not run at "
                     "this scale, or the records predate them).")
    superseded = int(table["n_superseded"].sum()) if len(table) else 0
    if superseded:
        notes.append(f"{superseded} older value(s) of rerun seeds were replaced by newer records.")
    unverified = [r for r in records if r.get("status") == "ok" and "data_sha256" not in r]
    if unverified:
        notes.append(f"Unverified data: {len(unverified)} of the ok records were written before "
                     "records held the sha256 of every data file they read (data_sha256), so "
                     "nothing traces the bytes their numbers came from.")
    return notes


def markdown_report(spec: ArtifactSpec, table: pd.DataFrame, anchors: pd.DataFrame,
                    records: list[dict[str, Any]], figure_name: str | None,
                    damaged: list[str] = ()) -> str:
    """The Markdown report in the layout of this module's docstring."""
    lines = [f"# {spec.paper} {spec.artifact} — {spec.title}", "", header_line(spec, records), ""]
    if figure_name:
        lines += [f"![{spec.paper} {spec.artifact} — {spec.title}]({figure_name})", ""]
    lines += anchors_section(spec, anchors)
    protocols = ordered_protocols(records)
    parts = {protocol: shown_part(spec, table, protocol) for protocol in protocols}
    for protocol in protocols:
        lines += compact_section(spec, parts[protocol], protocol)
    notes = report_notes(spec, table, records)
    if damaged:
        notes.append(f"{len(damaged)} damaged record(s) could not be read and are gaps here "
                     f"(rerun the artifact to redo those jobs): {'; '.join(damaged)}.")
    lines += ["## Notes", ""] + [f"- {note}" for note in notes] + [""]
    for protocol in protocols:
        lines += cells_section(spec, parts[protocol], protocol)
    return "\n".join(lines)
