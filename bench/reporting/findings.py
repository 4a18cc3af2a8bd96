"""``reports/FINDINGS.md``: every paper claim and printed number the harness contradicts or
cannot confirm, one line each, generated from the reports' summaries (never written by hand).

A claim is an anchor of a report spec; a printed number is a table cell with a paper value.
Contradicted is ``differs``; not confirmed is ``close``, ``inconclusive``, ``missing``,
``failed``, ``needs data`` or ``not comparable``. Each line gives our number beside the
paper's, a link to the report section holding it and the cause the spec gives (a side run,
a sensitivity row, an independent check). Claims get a line each (those waiting for data
share one); a number that differs under the paper's protocol gets a line of its own, the other
numbers one line per (protocol, verdict, cause). Reports rendered before causes were required
(summary schema 1, or backfilled) are not refused; their differs / close without a cause are
counted in a section of their own.
"""

from __future__ import annotations

from collections import Counter
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
    AGREES,
    CAUSE_REQUIRED,
    DIFFERS,
    INCONCLUSIVE,
    NEEDS_DATA,
    NOT_COMPARABLE,
    UNCONFIRMED,
)

CAUSE_CHARS = 400
STUDIES_HEADING = "Sensitivity studies and the corrected protocol"
STUDY_SUFFIX = " (studies)"
# Verdicts a paper paragraph counts (judged or waiting; "no paper value" is not a number).
JUDGED_OR_GAP = ("agrees", "close", "differs", "inconclusive", "not comparable", "missing",
                 "failed", "needs data")
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
    if first["verdict"] in (*CAUSE_REQUIRED, INCONCLUSIVE, NOT_COMPARABLE):
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


def in_part(items: Iterable[dict[str, Any]], studies: bool) -> list[dict[str, Any]]:
    """The cells or claims of the paper's rows under the paper's protocol (``studies``
    False) or of the sensitivity studies and the corrected protocol (True); entries written
    before the flag existed count as the paper's unless their protocol is another."""
    def is_study(item: dict[str, Any]) -> bool:
        return bool(item.get("study", item.get("protocol", "") not in PAPER_PROTOCOLS))

    return [item for item in items if is_study(item) == studies]


def claim_lines(summary: dict[str, Any], studies: bool = False) -> list[str]:
    """The report's claims not confirmed: one line each, those waiting for data together."""
    anchors = _by_verdict(in_part(summary.get("anchors") or [], studies))
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
                   owner: str = "", studies: bool = False) -> list[str]:
    """The findings of one report in one part (the paper's rows, or ``studies``): claims,
    then printed numbers; numbers of a shared experiment already listed under ``owner`` are
    only counted."""
    experiment = summary.get("experiment", "")
    cells = in_part(summary.get("unconfirmed_cells") or [], studies)
    own = [c for c in cells if _cell_key(experiment, c) not in listed_elsewhere]
    lines = (claim_lines(summary, studies)
             + number_lines(own, list(summary.get("counts") or {})))
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


def _part_sections(summaries: dict[str, dict[str, Any]], artifacts: list[tuple[str, str]],
                   studies: bool) -> tuple[list[str], int, int]:
    """The per-paper, per-report sections of one part, with its counts of claims and
    printed numbers listed."""
    sections: list[str] = []
    claims = numbers = 0
    current_paper = None
    owned = {key: summary for key, summary in summaries.items()
             if summary.get("experiment") == key}
    listed = {_cell_key(key, cell) for key, summary in owned.items()
              for cell in in_part(summary.get("unconfirmed_cells") or [], studies)}
    level = "###" if studies else "##"
    for paper, artifact in artifacts:
        key = f"{paper}/{artifact}"
        summary = summaries.get(key)
        if summary is None:
            continue
        experiment = summary.get("experiment", key)
        shared = listed if experiment != key and experiment in owned else set()
        title = _section_title(owned.get(experiment, {}))
        lines = artifact_lines(summary, shared, f"{title}{STUDY_SUFFIX if studies else ''}",
                               studies)
        if not lines:
            continue
        claims += len(_by_verdict(in_part(summary.get("anchors") or [], studies)))
        numbers += len([c for c in _by_verdict(in_part(summary.get("unconfirmed_cells")
                                                       or [], studies))
                        if _cell_key(experiment, c) not in shared])
        if paper != current_paper:
            sections += [f"{level} {paper}{STUDY_SUFFIX if studies else ''}", ""]
            current_paper = paper
        source = " (summary backfilled from the committed report)" if (
            summary.get("source") == "backfilled") else ""
        sections += [f"{level}# {_section_title(summary)}{STUDY_SUFFIX if studies else ''}",
                     "", f"[Report]({paper}/{artifact}.md){source}.", "", *lines, ""]
    return sections, claims, numbers


def _count_text(counts: Counter, what: str) -> str:
    total = sum(counts.values())
    if not total:
        return f"no {what}"
    listed = ", ".join(f"{n} {verdict}" for verdict, n in counts.most_common() if n)
    return f"{total} {what}: {listed}"


def paper_paragraphs(summaries: dict[str, dict[str, Any]],
                     artifacts: list[tuple[str, str]]) -> list[str]:
    """One generated paragraph per paper: what holds (agrees), what differs, what is not
    confirmed and what cannot run here, counted over its printed numbers and claims under
    the paper's protocol (paper rows only), then how many study verdicts are listed apart."""
    lines = ["## What holds, paper by paper", ""]
    for paper in dict.fromkeys(p for p, _ in artifacts):
        cells, claims, waiting, studies = Counter(), Counter(), [], Counter()
        differs_with_cause = differs = 0
        for name, artifact in artifacts:
            key = f"{name}/{artifact}"
            summary = summaries.get(key)
            experiment = (summary or {}).get("experiment", key)
            if name != paper or summary is None or (experiment != key
                                                    and experiment in summaries):
                continue  # a report of another report's records counts there
            for protocol, counts in (summary.get("counts") or {}).items():
                if protocol in PAPER_PROTOCOLS:
                    cells.update({v: n for v, n in counts.items()
                                  if v in JUDGED_OR_GAP and n})
            claims.update({v: n for v, n in (summary.get("anchor_counts") or {}).items()
                           if v in JUDGED_OR_GAP and n})
            for protocol_counts in (summary.get("study_counts") or {}).values():
                studies.update({v: n for v, n in protocol_counts.items()
                                if v in JUDGED_OR_GAP and n})
            studies.update({v: n for v, n in (summary.get("study_anchor_counts") or {}).items()
                            if v in JUDGED_OR_GAP and n})
            if summary.get("status") == NEEDS_DATA:
                waiting.append(artifact)
            for cell in in_part(summary.get("unconfirmed_cells") or [], False):
                if cell["verdict"] == DIFFERS and cell["protocol"] in PAPER_PROTOCOLS:
                    differs += 1
                    differs_with_cause += bool(cell.get("cause"))
        text = (f"**{paper}.** Under the paper's protocol, on the paper's own rows: "
                f"{_count_text(cells, 'printed number(s) judged or waiting')}; "
                f"{_count_text(claims, 'claim(s)')}. ")
        caused = f", {differs_with_cause} with a cause" if differs else ""
        text += (f"What holds: {cells.get(AGREES, 0)} number(s) and {claims.get(AGREES, 0)} "
                 f"claim(s) agree. What differs: {differs} number(s){caused} and "
                 f"{claims.get(DIFFERS, 0)} claim(s), listed below. ")
        if cells.get(INCONCLUSIVE) or claims.get(INCONCLUSIVE):
            text += (f"Inconclusive (our 95% CI too wide to decide: it holds the paper value "
                     f"and reaches past the close band, or a claimed change's CI holds zero): "
                     f"{cells.get(INCONCLUSIVE, 0)} number(s), {claims.get(INCONCLUSIVE, 0)} "
                     "claim(s). ")
        text += (f"Cannot run here: {cells.get(NEEDS_DATA, 0)} number(s) and "
                 f"{claims.get(NEEDS_DATA, 0)} claim(s) need data"
                 f"{' (' + ', '.join(waiting) + ' without records)' if waiting else ''}. ")
        text += (f"Not comparable (a failed fit, a stand-in, other hardware, other sets): "
                 f"{cells.get(NOT_COMPARABLE, 0)} number(s), {claims.get(NOT_COMPARABLE, 0)} "
                 f"claim(s). Sensitivity studies and the corrected protocol, counted apart: "
                 f"{_count_text(studies, 'verdict(s)')}.")
        lines += [text, ""]
    return lines


def findings_markdown(summaries: dict[str, dict[str, Any]],
                      artifacts: Iterable[tuple[str, str]]) -> str:
    """The findings page over ``artifacts`` (``(paper, artifact)`` pairs, in page order):
    the per-paper paragraphs, the paper's rows under the paper's protocol, then the
    sensitivity studies and the corrected protocol in a section of their own."""
    artifacts = list(artifacts)
    sections, claims, numbers = _part_sections(summaries, artifacts, studies=False)
    study_sections, study_claims, study_numbers = _part_sections(summaries, artifacts,
                                                                 studies=True)
    intro = [
        "# Findings", "",
        "Every paper claim (a report's anchors) and every printed paper number (a table cell "
        "with a paper value) that the harness contradicts (**differs**) or cannot confirm "
        "(**close**, **inconclusive**: our 95% CI too wide to decide, **missing**, **failed**, "
        "**needs data**, **not comparable**: our number measures something else, a stand-in "
        "for the paper's method, seconds on other hardware, a fit that failed its health "
        "checks): ours (the paper seed's value, else the mean over seeds) beside the "
        "paper's, a link to the report section and the cause the report spec gives. The "
        "main list holds the paper's rows under the paper's protocol; side runs, study "
        "arms (e.g. MAP recipes that are deliberately not the paper's) and the corrected "
        "protocol are listed apart under "
        f"[{STUDIES_HEADING}](#{heading_slug(STUDIES_HEADING)}): there a difference is the "
        "changed factor's effect, not the paper's. Generated by `python -m bench.report "
        "--index` from the reports' `<artifact>.summary.json`; do not edit by hand. Under "
        "the paper's protocol each differing number has its own line; other numbers are "
        "grouped by protocol, verdict and cause. Under the paper's protocol every differs "
        "and close of a report rendered now has a cause (rendering refuses one without); "
        "reports rendered before that rule are listed first with the count of those that "
        "have none.", "",
        f"{claims} claim(s) and {numbers} printed number(s) of the papers' rows listed; "
        f"{study_claims} claim(s) and {study_numbers} number(s) of studies apart.", "",
    ]
    intro += paper_paragraphs(summaries, artifacts)
    intro += before_causes_section(summaries, artifacts)
    studies = [f"## {STUDIES_HEADING}", "",
               "Side runs, study arms and the corrected protocol, judged against the paper's "
               "number only for orientation.", "", *study_sections]
    return "\n".join(intro + sections + studies)


def write_findings(out_dir: Path, summaries: dict[str, dict[str, Any]],
                   artifacts: Iterable[tuple[str, str]]) -> Path:
    """Rewrite ``<out_dir>/FINDINGS.md``; returns its path."""
    return write_atomically(Path(out_dir) / FINDINGS_NAME,
                            findings_markdown(summaries, artifacts))
