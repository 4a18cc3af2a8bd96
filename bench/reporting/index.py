"""``reports/README.md``: the scoreboard, then every artifact of the five papers, its make target
and its status; :func:`write_overview` also rewrites ``FINDINGS.md`` and ``timing.md``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.reporting.catalog import CATALOG, PAPERS, CatalogEntry
from bench.reporting.files import report_paths, write_atomically
from bench.reporting.findings import write_findings
from bench.reporting.formatting import markdown_table
from bench.reporting.registry import implemented_artifacts
from bench.reporting.scoreboard import scoreboard_markdown
from bench.reporting.study_split import split_summaries
from bench.reporting.summary import read_summaries, require_causes
from bench.reporting.timing_page import write_timing


def artifact_status(entry: CatalogEntry, out_dir: Path, implemented: bool) -> str:
    """``implemented`` or ``not yet implemented``, plus ``report present`` if its .md exists."""
    status = "implemented" if implemented else "not yet implemented"
    md = report_paths(entry.paper, entry.artifact, out_dir)["md"]
    return f"{status}, report present" if md.exists() else status


def index_markdown(out_dir: Path) -> str:
    """The index text: one section per paper, one line per artifact; the status comes from
    the registry (:mod:`bench.reporting.registry`)."""
    lines = [
        "# Reports",
        "",
        "Every artifact of the five papers. `make <target>` runs an artifact's experiments and "
        "renders its report; `python -m bench.report --all` re-renders every report from "
        "existing records and `python -m bench.report --index` rewrites this page, "
        "[FINDINGS.md](FINDINGS.md) and [timing.md](timing.md).",
        "",
    ]
    if (Path(out_dir) / "leaderboard.md").exists():
        lines += ["Methods ranked across the artifacts, a method of your own included "
                  "(`make benchmark METHOD=<name>`): [leaderboard.md](leaderboard.md).", ""]
    reported = [f"{paper}/{artifact}" for paper, artifact in catalog_artifacts()
                if report_paths(paper, artifact, out_dir)["md"].exists()]
    summaries = split_summaries(read_summaries(out_dir), implemented_artifacts(), out_dir)
    lines += scoreboard_markdown(summaries, catalog_artifacts(), reported)
    implemented = implemented_artifacts()
    for paper, citation in PAPERS.items():
        entries = [entry for entry in CATALOG if entry.paper == paper]
        rows = []
        for entry in entries:
            status = artifact_status(entry, out_dir, entry.key in implemented)
            name = (f"[{entry.artifact}]({paper}/{entry.artifact}.md)"
                    if status.endswith("report present") else entry.artifact)
            rows.append({"artifact": name, "title": entry.title,
                         "make target": f"`make {entry.make_target}`", "status": status})
        lines += [f"## {paper}", "", citation, "", markdown_table(pd.DataFrame(rows)),
                  ""]
    return "\n".join(lines)


def catalog_artifacts() -> list[tuple[str, str]]:
    """``(paper, artifact)`` of every catalog entry, papers in catalog order."""
    return [(entry.paper, entry.artifact) for paper in PAPERS
            for entry in CATALOG if entry.paper == paper]


def write_index(out_dir: Path) -> Path:
    """Rewrite ``<out_dir>/README.md`` from the catalog and the summaries; returns its path."""
    return write_atomically(Path(out_dir) / "README.md", index_markdown(out_dir))


def write_overview(out_dir: Path) -> list[Path]:
    """Rewrite ``README.md`` (scoreboard and index), ``FINDINGS.md`` and ``timing.md`` from the
    reports' summaries; returns their paths. Writes nothing when a summary under the cause
    rule has a differs / close without a cause (:func:`bench.reporting.summary.require_causes`
    raises MissingCause)."""
    summaries = split_summaries(read_summaries(out_dir), implemented_artifacts(), out_dir)
    require_causes(summaries.values())
    experiments = [spec.experiment for spec in implemented_artifacts().values()]
    return [write_index(out_dir), write_findings(out_dir, summaries, catalog_artifacts()),
            write_timing(out_dir, summaries, experiments)]
