"""Reports of artifacts whose data are not on this machine: every paper cell "needs data".

CIFAR-10, SVHN, EMNIST and the like cannot be had offline here. Their experiments are complete
for a cluster; until their records exist, the report says which files are missing and where they
go, and lists the paper's cells with the verdict ``needs data`` so the gap is visible.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.reporting.files import report_paths, summary_path, write_atomically
from bench.reporting.formatting import markdown_table
from bench.reporting.spec import SHOWN_ROOT, ArtifactSpec
from bench.reporting.summary import needs_data_summary, write_summary
from bench.reporting.targets import paper_values
from bench.reporting.verdicts import NEEDS_DATA

CELLS_HEADING = "Paper cells"
ANCHORS_HEADING = "Anchors (checked once records exist)"
__all__ = ["NEEDS_DATA", "SHOWN_ROOT", "anchors_table", "missing_cell_data", "missing_data",
           "needs_data_table", "render_needs_data"]


def missing_data(spec: ArtifactSpec, root: str | Path | None = None) -> list[str]:
    """One line per data need of ``spec.needs_data`` that the whole artifact needs (no
    ``cells``) whose files are missing under ``root`` (default: the data root), naming the
    files and their folder under ``$BENCH_DATA_DIR`` (each need's ``missing_message``);
    empty when everything is there."""
    lines = []
    for need in spec.needs_data:
        if need.cells:
            continue
        message = need.missing_message(root)
        if message:
            lines.append(message)
    return lines


def needs_data_table(spec: ArtifactSpec) -> pd.DataFrame:
    """The paper's cells of ``spec`` (targets CSV, ignored cells left out), all ``needs data``."""
    values = paper_values(spec.paper, spec.target_artifacts)
    lines = [{"row": row, "column": column, "paper": value.printed, "ours": "—",
              "verdict": NEEDS_DATA}
             for (row, column), value in values.items() if not spec.is_ignored(row, column)]
    return pd.DataFrame(lines, columns=["row", "column", "paper", "ours", "verdict"])


def missing_cell_data(spec: ArtifactSpec, root: str | Path | None = None) -> list[str]:
    """One line per data set of ``spec.needs_data`` that only some cells need (an optional
    OOD set) whose files are missing, naming those cells, the files and their folder."""
    lines = []
    for need in spec.needs_data:
        message = need.missing_message(None if root is None else str(root))
        if need.cells and message:
            cells = ", ".join(column if row == "*" else f"{row} {column}"
                              for row, column in need.cells)
            lines.append(f"for the {cells} cells only: {message}")
    return lines


def anchors_table(spec: ArtifactSpec) -> pd.DataFrame:
    """The spec's anchors (the paper's claims), each ``needs data``."""
    return pd.DataFrame([{"anchor": anchor.label, "paper": anchor.paper, "ours": "—",
                          "verdict": NEEDS_DATA} for anchor in spec.anchors],
                        columns=["anchor", "paper", "ours", "verdict"])


def render_needs_data(spec: ArtifactSpec, missing: list[str], out_dir: Path) -> list[Path]:
    """Write ``<artifact>.md`` and ``.csv`` saying which files the artifact waits for (and,
    with the paper's cells, the claims its anchors will check), and its summary sidecar;
    returns the paths of the two report files."""
    paths = report_paths(spec.paper, spec.artifact, out_dir)
    table = needs_data_table(spec)
    target = f"make reproduce-{spec.paper}-{spec.artifact} SCALE=paper"
    expected = [*missing, *missing_cell_data(spec)]
    lines = [f"# {spec.paper} {spec.artifact} — {spec.title}", "",
             f"Status: **{NEEDS_DATA}** · no records: the data below are not on this machine.",
             "", "## Data expected", ""] + [f"- {line}" for line in expected] + [
             "", f"With the files in place, `{target}` runs the experiment (configs and the "
             "Slurm GPU launcher are in conf/; see README) and this report is rendered from its "
             "records.", ""]
    if len(table):
        lines += [f"## {CELLS_HEADING}", "", markdown_table(table), ""]
    else:
        lines += ["_The paper prints no numbers for this artifact (figure only)._", ""]
    anchors = anchors_table(spec)
    if spec.anchors:
        lines += [f"## {ANCHORS_HEADING}", "", markdown_table(anchors), ""]
    if spec.notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in spec.notes] + [""]
    written = [write_atomically(paths["csv"], table.to_csv(index=False)),
               write_atomically(paths["md"], "\n".join(lines))]
    summary = needs_data_summary(spec, table, anchors.rename(columns={"anchor": "label"}),
                                 expected, (CELLS_HEADING, ANCHORS_HEADING))
    write_summary(summary_path(spec.paper, spec.artifact, out_dir), summary)
    return written
