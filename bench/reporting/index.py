"""``reports/README.md``: every artifact of the five papers, its make target and its status."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.reporting.catalog import CATALOG, PAPERS, CatalogEntry
from bench.reporting.formatting import markdown_table
from bench.reporting.registry import implemented_artifacts
from bench.reporting.render import report_paths, write_atomically


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
        "existing records and `python -m bench.report --index` rewrites this page.",
        "",
    ]
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


def write_index(out_dir: Path) -> Path:
    """Rewrite ``<out_dir>/README.md`` from the catalog; returns its path."""
    return write_atomically(Path(out_dir) / "README.md", index_markdown(out_dir))
