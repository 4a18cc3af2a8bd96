"""``reports/FINDINGS.md``: every paper claim and printed number the harness contradicts or
cannot confirm, one line each, generated from the reports' summaries (never written by hand).

A claim is an anchor of a report spec; a printed number is a table cell with a paper value.
Contradicted is ``differs``; not confirmed is ``close``, ``missing``, ``failed``, ``needs data``
or ``not comparable``. Each line gives our number beside the paper's, a link to the report
section holding it and the cause the spec gives (a side run, a sensitivity row, an independent
check). Claims get a line each (those waiting for data share one); a number that differs under
the paper's protocol gets a line of its own, the other numbers one line per (protocol, verdict,
cause). Reports rendered before causes were required (summary schema 1, or backfilled) are not
refused; their differs / close without a cause are counted in a section of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.reporting.catalog import make_target
from bench.reporting.files import write_atomically
from bench.reporting.formatting import GAP, format_compact
from bench.reporting.markdown import heading_slug
from bench.reporting.summary import (
    PAPER_PROTOCOLS,
    causeless_verdicts,
    under_cause_rule,
)
from bench.reporting.verdicts import (
    CAUSE_REQUIRED,
    DIFFERS,
    NEEDS_DATA,
    NOT_COMPARABLE,
    UNCONFIRMED,
)

CAUSE_CHARS = 400
FINDINGS_NAME = "FINDINGS.md"
BEFORE_CAUSES_HEADING = "Rendered before causes were required"
NO_CAUSE = " No cause given."


def _cause(text: str, verdict: str = "") -> str:
    """`` Cause: ...`` (shortened); for "needs data" the part naming the data, not the files."""
    text = " ".join(str(text).split())
    if verdict == NEEDS_DATA:
        text = "; ".join(part.split(": ")[0] for part in text.split("; ") if ": put " in part
                         or part.startswith(("image data set", "WILDS"))) or text
    if not text:
        return NO_CAUSE if verdict in CAUSE_REQUIRED else ""
    short = text if len(text) <= CAUSE_CHARS else text[: CAUSE_CHARS - 1] + "…"
    return f" Cause: {short}"


def _ours(value: float | None, unit: str = "") -> str:
    if value is None:
        return GAP
    return f"{format_compact(value)}{f' {unit}' if unit else ''}"


def _protocol(cell: dict[str, Any]) -> str:
    return f"protocol {cell['protocol']} · " if cell["protocol"] else ""


def claim_line(anchor: dict[str, Any]) -> str:
    """One claim: verdict, label, ours vs paper, link, cause."""
    return (f"- **{anchor['verdict']}** · claim: {anchor['label']} — ours "
            f"{_ours(anchor['ours'])} vs paper \"{anchor['paper']}\" "
            f"([anchors]({anchor['link']})).{_cause(anchor['cause'], anchor['verdict'])}")


def waiting_claims_line(anchors: list[dict[str, Any]]) -> str:
    """Claims that wait for data, in one line."""
    labels = "; ".join(anchor["label"] for anchor in anchors)
    return (f"- **{NEEDS_DATA}** · {len(anchors)} claim(s): {labels} "
            f"([anchors]({anchors[0]['link']})).{_cause(anchors[0]['cause'], NEEDS_DATA)}")


def cell_line(cell: dict[str, Any]) -> str:
    """One printed number: verdict, protocol, cell, ours vs paper, link, cause."""
    unit = cell.get("unit", "")
    return (f"- **{cell['verdict']}** · {_protocol(cell)}{cell['row']} {cell['column']}: ours "
            f"{_ours(cell['ours'], unit)} vs paper {cell['paper']}{f' {unit}' if unit else ''} "
            f"([table]({cell['link']})).{_cause(cell['cause'], cell['verdict'])}")


def group_line(cells: list[dict[str, Any]]) -> str:
    """Cells sharing a protocol, verdict and cause, in one line: each with ours vs paper
    (names only for gaps)."""
    first = cells[0]
    if first["verdict"] in (*CAUSE_REQUIRED, NOT_COMPARABLE):
        listed = "; ".join(f"{c['row']} {c['column']} {_ours(c['ours'])} vs {c['paper']}"
                           for c in cells)
    else:
        listed = ", ".join(f"{c['row']} {c['column']}" for c in cells)
    unit = f" ({first['unit']})" if first.get("unit") and all(
        c.get("unit") == first["unit"] for c in cells) else ""
    cause = _cause(first["cause"], first["verdict"])
    return (f"- **{first['verdict']}** · {_protocol(first)}{len(cells)} paper number(s)"
            f"{unit}: {listed} ([table]({first['link']})).{cause}")


def _by_verdict(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((i for i in items if i["verdict"] in UNCONFIRMED),
                  key=lambda item: UNCONFIRMED.index(item["verdict"]))


def claim_lines(summary: dict[str, Any]) -> list[str]:
    """The report's claims not confirmed: one line each, those waiting for data together."""
    anchors = _by_verdict(summary.get("anchors") or [])
    waiting = [a for a in anchors if a["verdict"] == NEEDS_DATA]
    lines = [claim_line(a) for a in anchors if a["verdict"] != NEEDS_DATA]
    return lines + ([waiting_claims_line(waiting)] if waiting else [])


def number_lines(cells: list[dict[str, Any]], protocols: list[str]) -> list[str]:
    """Printed numbers not confirmed: under the paper's protocol each differing number on its
    own line; the others grouped by protocol, verdict and cause."""
    def protocol_rank(cell: dict[str, Any]) -> int:
        return protocols.index(cell["protocol"]) if cell["protocol"] in protocols else -1

    lines, groups = [], {}
    for cell in sorted(_by_verdict(cells), key=protocol_rank):
        if cell["verdict"] == DIFFERS and cell["protocol"] in PAPER_PROTOCOLS:
            lines.append(cell_line(cell))
        else:
            groups.setdefault((cell["protocol"], cell["verdict"], cell["cause"]), []).append(cell)
    return lines + [group_line(group) for group in groups.values()]


def _cell_key(experiment: str, cell: dict[str, Any]) -> tuple:
    return (experiment, cell["protocol"], cell["row"], cell["column"], cell["paper"])


def artifact_lines(summary: dict[str, Any], listed_elsewhere: set[tuple] = frozenset(),
                   owner: str = "") -> list[str]:
    """The findings of one report: claims, then printed numbers; numbers of a shared
    experiment already listed under ``owner`` are only counted."""
    experiment = summary.get("experiment", "")
    cells = summary.get("unconfirmed_cells") or []
    own = [c for c in cells if _cell_key(experiment, c) not in listed_elsewhere]
    lines = claim_lines(summary) + number_lines(own, list(summary.get("counts") or {}))
    shared = len(cells) - len(own)
    if shared:
        lines.append(f"- {shared} paper number(s) of the same records are listed under "
                     f"[{owner}](#{heading_slug(owner)}).")
    return lines


def _section_title(summary: dict[str, Any]) -> str:
    if not summary:
        return ""
    scale = f"{summary['scale']} scale" if summary.get("scale") else "no records"
    return f"{summary['paper']} {summary['artifact']} ({scale})"


def before_causes_section(summaries: dict[str, dict[str, Any]],
                          artifacts: Iterable[tuple[str, str]]) -> list[str]:
    """The section on reports rendered before causes were required that hold differs / close
    without a cause under the paper protocol: one line each with how many, which, and the make
    target that re-renders it (no lines when there are none)."""
    lines, count = [], 0
    for paper, artifact in artifacts:
        summary = summaries.get(f"{paper}/{artifact}")
        if summary is None or under_cause_rule(summary):
            continue
        found = causeless_verdicts(summary)
        if found:
            count += len(found)
            lines.append(f"- [{paper} {artifact}]({paper}/{artifact}.md) (summary "
                         f"{summary.get('source', '?')}, schema "
                         f"{summary.get('schema_version', 1)}): {len(found)} differs/close "
                         f"without a cause, re-render with `make {make_target(paper, artifact)}`: "
                         f"{'; '.join(found)}.")
    if not lines:
        return []
    return [f"## {BEFORE_CAUSES_HEADING}", "",
            f"{len(lines)} report(s) rendered before causes were required hold {count} "
            "differs/close under the paper protocol without a cause (their lines below say "
            f"\"{NO_CAUSE.strip()}\"); re-rendering them from records requires one.", "",
            *lines, ""]


def findings_markdown(summaries: dict[str, dict[str, Any]],
                      artifacts: Iterable[tuple[str, str]]) -> str:
    """The findings page over ``artifacts`` (``(paper, artifact)`` pairs, in page order)."""
    artifacts = list(artifacts)
    sections: list[str] = []
    claims = numbers = 0
    current_paper = None
    owned = {key: summary for key, summary in summaries.items()
             if summary.get("experiment") == key}
    listed = {_cell_key(key, cell) for key, summary in owned.items()
              for cell in summary.get("unconfirmed_cells") or []}
    for paper, artifact in artifacts:
        key = f"{paper}/{artifact}"
        summary = summaries.get(key)
        if summary is None:
            continue
        experiment = summary.get("experiment", key)
        shared = listed if experiment != key and experiment in owned else set()
        lines = artifact_lines(summary, shared, _section_title(owned.get(experiment, {})))
        if not lines:
            continue
        claims += len(_by_verdict(summary.get("anchors") or []))
        numbers += len([c for c in _by_verdict(summary.get("unconfirmed_cells") or [])
                        if _cell_key(experiment, c) not in shared])
        if paper != current_paper:
            sections += [f"## {paper}", ""]
            current_paper = paper
        source = " (summary backfilled from the committed report)" if (
            summary.get("source") == "backfilled") else ""
        sections += [f"### {_section_title(summary)}", "",
                     f"[Report]({paper}/{artifact}.md){source}.", "", *lines, ""]
    intro = [
        "# Findings", "",
        "Every paper claim (a report's anchors) and every printed paper number (a table cell "
        "with a paper value) that the harness contradicts (**differs**) or cannot confirm "
        "(**close**, **missing**, **failed**, **needs data**, **not comparable**: our number "
        "measures something else, a stand-in for the paper's method or seconds on other "
        "hardware): ours (the paper seed's value, else the mean over seeds) beside the "
        "paper's, a link to the report section and the cause the report spec gives. Cells of "
        "the corrected protocol are compared with the paper only for orientation: there a "
        "difference is the correction's effect. Generated by `python -m bench.report --index` "
        "from the reports' `<artifact>.summary.json`; do not edit by hand. Under the paper's "
        "protocol each differing number has its own line; other numbers are grouped by "
        "protocol, verdict and cause. Under the paper's protocol every differs and close of a "
        "report rendered now has a cause (rendering refuses one without); reports rendered "
        "before that rule are listed first with the count of those that have none.", "",
        f"{claims} claim(s) and {numbers} printed number(s) listed.", "",
    ]
    intro += before_causes_section(summaries, artifacts)
    return "\n".join(intro + sections)


def write_findings(out_dir: Path, summaries: dict[str, dict[str, Any]],
                   artifacts: Iterable[tuple[str, str]]) -> Path:
    """Rewrite ``<out_dir>/FINDINGS.md``; returns its path."""
    return write_atomically(Path(out_dir) / FINDINGS_NAME,
                            findings_markdown(summaries, artifacts))
