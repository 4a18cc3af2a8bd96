"""The scoreboard at the top of ``reports/README.md``: per artifact and protocol, the verdict
counts of its cells, its claims, the scale and the date of its records, from the summaries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from bench.reporting.formatting import GAP, markdown_table
from bench.reporting.summary import under_cause_rule, under_verdict_rules
from bench.reporting.verdicts import (
    AGREES,
    INCONCLUSIVE,
    NO_PAPER_VALUE,
    NOT_COMPARABLE,
    VERDICTS,
)

SCOREBOARD_HEADING = "Scoreboard"


def record_dates_text(summary: dict[str, Any]) -> str:
    """When the records were made: the finishing days, or what is known instead."""
    if summary.get("status") != "records":
        return f"{GAP} (no records)"
    records = summary.get("records") or {}
    first, last = (str(records.get("first_started") or "")[:10],
                   str(records.get("last_finished") or "")[:10])
    if last:
        return last if first in ("", last) else f"{first} to {last}"
    committed = (summary.get("backfilled_from") or {}).get("report_committed")
    return f"{GAP} (before {committed}, the report's commit)" if committed else f"{GAP} (unknown)"


def records_text(summary: dict[str, Any]) -> str:
    """``"72 (72 ok)"``, ``"12 (10 ok, 2 failed)"``, or the gap."""
    records = summary.get("records")
    if not records:
        return GAP
    failed = f", {records['failed']} failed" if records.get("failed") else ""
    return f"{records['total']} ({records['ok']} ok{failed})"


def claims_text(counts: dict[str, int]) -> str:
    """``"5 of 9 agree; 2 differs; 2 close"`` for a report's anchors (``—`` when none)."""
    total = sum(counts.values())
    if not total:
        return GAP
    others = "; ".join(f"{n} {verdict}" for verdict, n in counts.items()
                       if n and verdict != AGREES)
    text = f"{counts.get(AGREES, 0)} of {total} agree"
    return f"{text}; {others}" if others else text


def studies_text(summary: dict[str, Any], protocol: str) -> str:
    """The verdicts of one protocol's study cells with a paper value (side runs, study arms,
    the corrected protocol), e.g. ``"3 differs, 2 close of 9"``; the gap when there are
    none."""
    counts = {verdict: n for verdict, n in
              ((summary.get("study_counts") or {}).get(protocol) or {}).items()
              if verdict != NO_PAPER_VALUE}
    total = sum(counts.values())
    if not total:
        return GAP
    listed = ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n)
    return f"{listed} of {total}" if len([n for n in counts.values() if n]) > 1 else listed


def rules_text(summary: dict[str, Any]) -> str:
    """Which verdict rules a summary's verdicts were judged under."""
    if under_verdict_rules(summary):
        return "current"
    version = int(summary.get("schema_version") or 1)
    return f"before fit health (schema {version}): re-render from records"


def count_texts(summary: dict[str, Any], counts: dict[str, int]) -> dict[str, str]:
    """The verdict columns of one line; ``not comparable`` and ``inconclusive`` are the gap
    for a summary written before that verdict existed (its cells were judged then)."""
    texts = {verdict: str(counts.get(verdict, 0)) for verdict in VERDICTS}
    if not under_cause_rule(summary):
        texts[NOT_COMPARABLE] = GAP
    if not under_verdict_rules(summary):
        texts[INCONCLUSIVE] = GAP
    return texts


def scoreboard_rows(summaries: dict[str, dict[str, Any]], artifacts: Iterable[tuple[str, str]],
                    reported: Iterable[str] = ()) -> pd.DataFrame:
    """One line per (artifact, protocol) of the summaries, in the order of ``artifacts``
    (``(paper, artifact)`` pairs); an artifact without a summary shows the gap, which says
    whether it has a report (``reported``: ``<paper>/<artifact>`` keys) at all."""
    reported = set(reported)
    lines = []
    for paper, artifact in artifacts:
        key = f"{paper}/{artifact}"
        summary = summaries.get(key)
        if summary is None:
            why = ("no summary: run `python -m bench.report --index`"
                   if key in reported else "no report yet")
            lines.append({"paper": paper, "artifact": artifact, "protocol": GAP,
                          "scale": f"{GAP} ({why})", **dict.fromkeys(VERDICTS, GAP)})
            continue
        link = f"[{artifact}]({paper}/{artifact}.md)"
        for index, (protocol, counts) in enumerate(summary["counts"].items()):
            lines.append({
                "paper": paper, "artifact": link if index == 0 else "↳",
                "protocol": protocol or GAP,
                "scale": summary.get("scale") or f"{GAP} (no records)",
                "records": records_text(summary), "record dates": record_dates_text(summary),
                **count_texts(summary, counts),
                "studies": studies_text(summary, protocol),
                "claims": claims_text(summary.get("anchor_counts") or {}) if index == 0 else "",
                "study claims": (claims_text(summary.get("study_anchor_counts") or {})
                                 if index == 0 else ""),
                "verdict rules": rules_text(summary) if index == 0 else "",
                "summary": summary.get("source", "") if index == 0 else "",
            })
    columns = ["paper", "artifact", "protocol", "scale", "records", "record dates",
               *VERDICTS, "studies", "claims", "study claims", "verdict rules", "summary"]
    return pd.DataFrame(lines, columns=columns).fillna("")


def scoreboard_markdown(summaries: dict[str, dict[str, Any]], artifacts: Iterable[tuple[str, str]],
                        reported: Iterable[str] = ()) -> list[str]:
    """The scoreboard section (heading, how to read it, table) as Markdown lines."""
    return [
        f"## {SCOREBOARD_HEADING}", "",
        "Verdict counts of each report's table cells (its CSV lines) on the paper's own rows, "
        "per protocol; 'studies' counts the cells of side runs and study arms apart (rows "
        "that deliberately change one factor of the paper's protocol; a whole study artifact "
        "such as map-recipe), and 'study claims' the claims under the corrected protocol. "
        "'verdict rules' says whether a report was judged under the current rules "
        "(README, 'Verdict rules') or before them, when its records are no longer here to "
        "re-render it. 'claims' "
        "are its anchors (the paper's statements checked from the records), listed with every "
        "paper number not confirmed in [FINDINGS.md](FINDINGS.md); job times are in "
        "[timing.md](timing.md). 'not comparable' counts cells whose number measures something "
        "other than the paper's (a stand-in for the paper's method, seconds on other "
        "hardware; the cause says which), counted neither as agreeing nor as differing; it is "
        f"{GAP} for a report rendered before that verdict existed. Read from each report's "
        "`<artifact>.summary.json`; 'backfilled' marks a summary read once from a report "
        "rendered before summaries existed, whose record dates and job times are not "
        "available.", "",
        markdown_table(scoreboard_rows(summaries, artifacts, reported)), "",
    ]
