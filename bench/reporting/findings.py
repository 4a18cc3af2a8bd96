"""``reports/FINDINGS.md``: every paper claim and printed number the harness contradicts or
cannot confirm, one line each, generated from the reports' summaries (never written by hand).

A claim is an anchor of a report spec; a printed number is a table cell with a paper value.
Contradicted is ``differs``; not confirmed is ``close``, ``missing``, ``failed`` or ``needs data``.
Each line gives our number beside the paper's, a link to the report section holding it and
the cause the spec gives (a protocol fact, a scale deviation). Gaps that share one cause
(``missing``, ``failed``, ``needs data`` cells) are one line listing their cells.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.reporting.files import write_atomically
from bench.reporting.formatting import GAP, format_compact
from bench.reporting.summary import UNCONFIRMED
from bench.reporting.verdicts import CLOSE, DIFFERS

CAUSE_CHARS = 400
ONE_LINE_EACH = (DIFFERS, CLOSE)
FINDINGS_NAME = "FINDINGS.md"


def _cause(text: str) -> str:
    text = " ".join(str(text).split())
    if not text:
        return ""
    short = text if len(text) <= CAUSE_CHARS else text[: CAUSE_CHARS - 1] + "…"
    return f" Cause: {short}"


def _ours(value: float | None, unit: str = "") -> str:
    if value is None:
        return GAP
    return f"{format_compact(value)}{f' {unit}' if unit else ''}"


def claim_line(anchor: dict[str, Any]) -> str:
    """One claim: verdict, label, ours vs paper, link, cause."""
    return (f"- **{anchor['verdict']}** · claim: {anchor['label']} — ours "
            f"{_ours(anchor['ours'])} vs paper \"{anchor['paper']}\" "
            f"([anchors]({anchor['link']})).{_cause(anchor['cause'])}")


def cell_line(cell: dict[str, Any]) -> str:
    """One printed number: verdict, protocol, cell, ours vs paper, link, cause."""
    protocol = f"protocol {cell['protocol']} · " if cell["protocol"] else ""
    unit = cell.get("unit", "")
    return (f"- **{cell['verdict']}** · {protocol}{cell['row']} {cell['column']}: ours "
            f"{_ours(cell['ours'], unit)} vs paper {cell['paper']}{f' {unit}' if unit else ''} "
            f"([table]({cell['link']})).{_cause(cell['cause'])}")


def gap_line(cells: list[dict[str, Any]]) -> str:
    """Cells sharing a gap verdict and cause, in one line."""
    first = cells[0]
    protocol = f"protocol {first['protocol']} · " if first["protocol"] else ""
    names = ", ".join(f"{c['row']} {c['column']}" for c in cells)
    return (f"- **{first['verdict']}** · {protocol}{len(cells)} paper number(s): {names} "
            f"([table]({first['link']})).{_cause(first['cause'])}")


def _by_verdict(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((i for i in items if i["verdict"] in UNCONFIRMED),
                  key=lambda item: UNCONFIRMED.index(item["verdict"]))


def artifact_lines(summary: dict[str, Any]) -> list[str]:
    """The findings of one report: its claims, then its printed numbers."""
    lines = [claim_line(anchor) for anchor in _by_verdict(summary.get("anchors") or [])]
    protocols = list(summary.get("counts") or {})
    cells = sorted(_by_verdict(summary.get("unconfirmed_cells") or []),
                   key=lambda c: protocols.index(c["protocol"])
                   if c["protocol"] in protocols else len(protocols))
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for cell in cells:
        if cell["verdict"] in ONE_LINE_EACH:
            lines.append(cell_line(cell))
        else:
            groups.setdefault((cell["protocol"], cell["verdict"], cell["cause"]), []).append(cell)
    return lines + [gap_line(group) for group in groups.values()]


def findings_markdown(summaries: dict[str, dict[str, Any]],
                      artifacts: Iterable[tuple[str, str]]) -> str:
    """The findings page over ``artifacts`` (``(paper, artifact)`` pairs, in page order)."""
    sections: list[str] = []
    claims = numbers = 0
    current_paper = None
    for paper, artifact in artifacts:
        summary = summaries.get(f"{paper}/{artifact}")
        if summary is None:
            continue
        lines = artifact_lines(summary)
        if not lines:
            continue
        claims += len(_by_verdict(summary.get("anchors") or []))
        numbers += len(_by_verdict(summary.get("unconfirmed_cells") or []))
        if paper != current_paper:
            sections += [f"## {paper}", ""]
            current_paper = paper
        scale = summary.get("scale") or "no records"
        source = ", summary backfilled from the committed report" if (
            summary.get("source") == "backfilled") else ""
        sections += [f"### [{artifact}]({paper}/{artifact}.md) — {scale}{source}", "",
                     *lines, ""]
    intro = [
        "# Findings", "",
        "Every paper claim (a report's anchors) and every printed paper number (a table cell "
        "with a paper value) that the harness contradicts (**differs**) or cannot confirm "
        "(**close**, **missing**, **failed**, **needs data**): ours (the paper seed's value, "
        "else the mean over seeds) beside the paper's, a link to the report section and the "
        "cause the report spec gives. Cells of the corrected protocol are compared with the "
        "paper only for orientation: there a difference is the correction's effect. Generated "
        "by `python -m bench.report --index` from the reports' `<artifact>.summary.json`; do "
        "not edit by hand.", "",
        f"{claims} claim(s) and {numbers} printed number(s) listed.", "",
    ]
    return "\n".join(intro + sections)


def write_findings(out_dir: Path, summaries: dict[str, dict[str, Any]],
                   artifacts: Iterable[tuple[str, str]]) -> Path:
    """Rewrite ``<out_dir>/FINDINGS.md``; returns its path."""
    return write_atomically(Path(out_dir) / FINDINGS_NAME,
                            findings_markdown(summaries, artifacts))
