"""The one generic renderer: spec + records -> ``<out>/<paper>/<artifact>.{md,csv,tex,png}``
and the machine-readable ``<artifact>.summary.json`` (:mod:`bench.reporting.summary`).

Reports are derived files, so they are replaced on every render (atomically: a temporary
file in the same folder, then ``os.replace``), unlike records, which are never overwritten.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pandas as pd

from bench.reporting.compare import anchor_table, comparison_table, ordered_protocols, scales_of
from bench.reporting.files import report_paths, summary_path, write_atomically
from bench.reporting.formatting import GAP
from bench.reporting.markdown import display_frame, header_line, markdown_report, shown_part
from bench.reporting.spec import ArtifactSpec
from bench.reporting.summary import rendered_summary, require_causes, write_summary

LATEX_REPLACEMENTS = {"±": r"$\pm$", GAP: "---", "…": r"\ldots{}"}
__all__ = ["ScaleConflict", "display_frame", "header_line", "latex_report", "render_report",
           "report_paths", "shown_part", "summary_path", "write_atomically"]


def latex_report(spec: ArtifactSpec, table: pd.DataFrame, records: list[dict[str, Any]]) -> str:
    """One booktabs tabular per protocol, preceded by a comment naming protocol and scale."""
    parts = []
    for protocol in ordered_protocols(records):
        part = shown_part(spec, table, protocol)
        parts.append(f"% {spec.paper} {spec.artifact} — {spec.title}\n"
                     f"% protocol {protocol}, scale {scales_of(records)}")
        if part.empty:
            continue
        tex = display_frame(spec, part).to_latex(index=False, escape=True)
        for symbol, replacement in LATEX_REPLACEMENTS.items():
            tex = tex.replace(symbol, replacement)
        parts.append(tex)
    return "\n".join(parts) + "\n"


def _gap_figure(spec: ArtifactSpec, records: list[dict[str, Any]], reason: str):
    """A figure that states why the artifact's figure cannot be drawn (the gap, shown)."""
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 2))
    failed = sum(r.get("status") != "ok" for r in records)
    axis.text(0.5, 0.5, f"{spec.paper} {spec.artifact}: no figure\n{failed} of {len(records)} "
              f"run(s) failed; {reason}", ha="center", va="center", wrap=True)
    axis.set_axis_off()
    return figure


def _figure_png(spec: ArtifactSpec, records: list[dict[str, Any]]) -> bytes:
    import matplotlib.pyplot as plt

    ok = [r for r in records if r.get("status") == "ok"]
    try:
        figure = spec.figure(ok, spec) if ok else _gap_figure(spec, records, "no ok record")
    except (LookupError, ValueError) as err:
        figure = _gap_figure(spec, records, f"{type(err).__name__}: {err}")
    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, format="png", dpi=150, bbox_inches="tight")
    finally:
        plt.close(figure)
    return buffer.getvalue()


class ScaleConflict(ValueError):
    """A report would replace one rendered from records of another scale."""


def existing_report_scale(markdown_path: Path) -> str | None:
    """The scale named in the header line of an existing Markdown report, if any."""
    if not markdown_path.is_file():
        return None
    match = re.search(r"^Scale: ([^ ·]+)", markdown_path.read_text(encoding="utf-8"), re.M)
    return match.group(1) if match else None


def render_report(spec: ArtifactSpec, records: list[dict[str, Any]], out_dir: Path,
                  damaged: list[str] = (), replace_scale: bool = False) -> list[Path]:
    """Write the report of ``spec`` from ``records`` (one scale) into ``out_dir``.

    Writes ``<paper>/<artifact>.csv`` (long table), ``.md`` and ``.tex``, and ``.png`` when
    the spec has a figure function, which is called as ``spec.figure(ok_records, spec)``;
    then the summary sidecar ``.summary.json`` (:func:`bench.reporting.files.summary_path`).
    ``damaged`` names records that could not be read; the notes list them as gaps.
    A report of another scale is never replaced (ScaleConflict) unless ``replace_scale``.
    Nothing is written when a differs / close under the paper protocol has no cause
    (:class:`bench.reporting.summary.MissingCause`, one line naming the artifact and the
    cells). Records are first put in the paper's vocabulary by ``spec.record_view``.
    Returns the written paths. Raises ValueError when there are no records.
    """
    if not records:
        raise ValueError(f"no records to report for {spec.key}")
    if spec.record_view is not None:
        records = [spec.record_view(record) for record in records]
    paths = report_paths(spec.paper, spec.artifact, out_dir)
    previous, scale = existing_report_scale(paths["md"]), scales_of(records)
    if previous and previous != scale and not replace_scale:
        raise ScaleConflict(f"{paths['md']} holds a {previous}-scale report; a {scale}-scale "
                            "report does not replace it (choose another --out, or pass "
                            "--replace-scale)")
    table = comparison_table(spec, records)
    anchors = anchor_table(spec, records)
    summary = rendered_summary(spec, table, anchors, records)
    require_causes([summary])
    written = [write_atomically(paths["csv"], table.to_csv(index=False))]
    figure_name = None
    if spec.figure is not None:
        written.append(write_atomically(paths["png"], _figure_png(spec, records)))
        figure_name = paths["png"].name
    markdown = markdown_report(spec, table, anchors, records, figure_name, damaged)
    written.append(write_atomically(paths["md"], markdown))
    written.append(write_atomically(paths["tex"], latex_report(spec, table, records)))
    write_summary(summary_path(spec.paper, spec.artifact, out_dir), summary)
    return written
