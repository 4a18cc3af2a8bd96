"""Summaries of reports rendered before summaries existed, read once from their committed files.

The records behind most committed reports are not kept (``results/`` is not committed), so
their summary is taken from what the report itself holds: the verdict counts and the cells
from its CSV, the claims from its Markdown anchors table, scale, record counts and git shas
from its header line. The summary says it was backfilled, from which commit of the report,
and that the record dates and job times are not available (``gaps``); the only date known is
the report's commit, which the records precede. Nothing else is filled in.
"""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd

from bench.reporting.files import report_paths, summary_path
from bench.reporting.spec import ArtifactSpec
from bench.reporting.summary import (
    NO_PROTOCOL,
    SCHEMA_VERSION,
    anchor_entries,
    is_current,
    report_link,
    unconfirmed_cells,
    verdict_counts,
    write_summary,
)
from bench.reporting.verdicts import NEEDS_DATA

ANCHOR_HEADINGS = ("Anchors", "Anchors (checked once records exist)",
                   "Checks waiting for records")
NEEDS_DATA_CELLS_HEADING = "Paper cells"
PROTOCOL_ORDER = ("paper", "corrected")
NOT_KEPT = ("records not kept here (results/ is not committed) and the report predates "
            "summaries")


def split_row(line: str) -> list[str]:
    """The cells of one pipe-table line (``\\|`` is a literal bar inside a cell)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def markdown_sections(text: str) -> dict[str, list[str]]:
    """The lines under each ``## heading`` of a Markdown text."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return sections


def first_table(lines: list[str]) -> pd.DataFrame:
    """The first pipe table among ``lines`` (header, separator, rows) as strings."""
    rows = [split_row(line) for line in lines if line.lstrip().startswith("|")]
    if len(rows) < 2:
        return pd.DataFrame()
    header, body = rows[0], rows[2:]
    return pd.DataFrame([dict(zip(header, row, strict=False)) for row in body], columns=header)


def anchors_from_markdown(text: str) -> tuple[str, pd.DataFrame]:
    """The anchors heading and table of a report (label, paper, ours, verdict, cause)."""
    sections = markdown_sections(text)
    for heading in ANCHOR_HEADINGS:
        if heading in sections:
            table = first_table(sections[heading])
            table = table.rename(columns={"anchor": "label"})
            for column in ("ours", "cause"):
                if column not in table:
                    table[column] = ""
            table["ours"] = [_number(v) for v in table["ours"]]
            return heading, table[["label", "paper", "ours", "verdict", "cause"]]
    return ANCHOR_HEADINGS[0], pd.DataFrame(columns=["label", "paper", "ours", "verdict",
                                                      "cause"])


def _number(text: Any) -> float:
    try:
        return float(str(text).replace("−", "-"))
    except ValueError:
        return math.nan


def header_facts(text: str) -> dict[str, Any]:
    """Scale, record counts and git shas stated in a report's header line (None if absent)."""
    scale = re.search(r"^Scale: ([^ ·]+)", text, re.M)
    counts = re.search(r"Records: (\d+) \((\d+) ok, (\d+) failed\)", text)
    shas = re.search(r"Git: ([^·\n]+)", text)
    records = None
    if counts:
        listed = shas.group(1) if shas else ""
        records = {"total": int(counts.group(1)), "ok": int(counts.group(2)),
                   "failed": int(counts.group(3)), "first_started": None,
                   "last_finished": None,
                   "git_shas": re.findall(r"\b[0-9a-f]{7,40}\b", listed),
                   "uncommitted_changes": "uncommitted changes" in listed}
    return {"scale": scale.group(1) if scale else None, "records": records}


def _git(folder: Path, *args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                              timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def last_commit(path: Path) -> tuple[str | None, str | None]:
    """Sha and date (YYYY-MM-DD) of the last commit that changed ``path`` (None, None outside
    git or for an uncommitted file)."""
    out = (_git(path.parent, "log", "-1", "--format=%H %cs", "--", path.name) or "").split()
    return (out[0], out[1]) if len(out) == 2 else (None, None)


def has_uncommitted_changes(*paths: Path) -> bool | None:
    """Whether any of ``paths`` differs from its last commit (None outside git)."""
    out = _git(paths[0].parent, "status", "--porcelain", "--", *(p.name for p in paths))
    return None if out is None else bool(out.strip())


def _protocols(cells: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(cells["protocol"]))
    return ([p for p in PROTOCOL_ORDER if p in present]
            + [p for p in present if p not in PROTOCOL_ORDER])


def backfilled_summary(spec: ArtifactSpec, out_dir: Path) -> dict[str, Any]:
    """The summary of ``spec``'s committed report, read from its CSV and Markdown."""
    paths = report_paths(spec.paper, spec.artifact, out_dir)
    text = paths["md"].read_text(encoding="utf-8")
    cells = pd.read_csv(paths["csv"], dtype=str, keep_default_na=False)
    needs_data = "protocol" not in cells.columns
    sha, day = last_commit(paths["md"])
    heading, anchors = anchors_from_markdown(text)
    facts = header_facts(text)
    if needs_data:
        expected = [line[2:] for line in markdown_sections(text).get("Data expected", [])
                    if line.startswith("- ")]
        cells = cells.assign(protocol=NO_PROTOCOL, cause="; ".join(expected))
        anchors = anchors.assign(cause=["; ".join(expected)] * len(anchors))
    protocols = _protocols(cells) if len(cells) else ([] if needs_data else ["paper"])
    cell_heading = (lambda _: NEEDS_DATA_CELLS_HEADING) if needs_data else (
        lambda p: f"Protocol: {p}")
    committed = f"on {day}" if day else "(commit date unknown)"
    gaps = {"timings": NOT_KEPT,
            "record_dates": f"{NOT_KEPT}; the records precede the report's commit {committed}"}
    if needs_data:
        gaps = {"records": "no records: the data are not on this machine",
                "timings": "no records: the data are not on this machine"}
    return {
        "schema_version": SCHEMA_VERSION, "paper": spec.paper, "artifact": spec.artifact,
        "title": spec.title, "experiment": spec.experiment, "source": "backfilled",
        "backfilled_from": {"report_git_sha": sha, "report_committed": day,
                            "uncommitted_changes": has_uncommitted_changes(paths["csv"],
                                                                           paths["md"]),
                            "files": [paths["csv"].name, paths["md"].name]},
        "status": NEEDS_DATA if needs_data else "records", "scale": facts["scale"],
        "protocols": [] if needs_data else protocols,
        "counts": {p: verdict_counts(cells.loc[cells["protocol"] == p, "verdict"])
                   for p in (protocols or [NO_PROTOCOL])},
        "anchor_counts": verdict_counts(anchors["verdict"]),
        "anchors": anchor_entries(anchors, report_link(spec.paper, spec.artifact, heading)),
        "unconfirmed_cells": unconfirmed_cells(
            cells, lambda p: report_link(spec.paper, spec.artifact, cell_heading(p))),
        "records": facts["records"], "timings": None, "gaps": gaps,
    }


def backfill_summaries(specs: dict[str, ArtifactSpec], out_dir: Path) -> list[Path]:
    """Write the summary of every report (Markdown and CSV present) that has none, or whose
    summary describes another CSV (the report was re-rendered by code that writes no
    summary); returns the written paths."""
    written = []
    for spec in specs.values():
        paths = report_paths(spec.paper, spec.artifact, out_dir)
        target = summary_path(spec.paper, spec.artifact, out_dir)
        if is_current(target) or not (paths["md"].is_file() and paths["csv"].is_file()):
            continue
        written.append(write_summary(target, backfilled_summary(spec, out_dir)))
    return written
