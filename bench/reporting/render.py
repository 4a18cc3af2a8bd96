"""The one generic renderer: spec + records -> ``<out>/<paper>/<artifact>.{md,csv,tex,png}``.

Reports are derived files, so they are replaced on every render (atomically: a temporary
file in the same folder, then ``os.replace``), unlike records, which are never overwritten.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from bench.reporting.compare import (
    anchor_table,
    comparison_table,
    hidden_extra_cells,
    ordered_protocols,
    scales_of,
)
from bench.reporting.formatting import (
    GAP,
    format_mean_ci,
    format_mean_stderr,
    format_number,
    markdown_table,
)
from bench.reporting.spec import ArtifactSpec

LATEX_REPLACEMENTS = {"±": r"$\pm$", GAP: "---", "…": r"\ldots{}"}


def write_atomically(path: Path, data: str | bytes) -> Path:
    """Replace ``path`` with ``data`` in one step (readers never see a partial file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def _unique(values: list[Any]) -> list[str]:
    return sorted({str(v) for v in values if v not in (None, "")})


def header_line(spec: ArtifactSpec, records: list[dict[str, Any]]) -> str:
    """Scale, protocols, seeds, record counts, git sha(s) and torch version(s) on one line."""
    statuses = Counter(r.get("status", "failed") for r in records)
    seeds = sorted({int(r["seed"]) for r in records if r.get("seed") is not None})
    paper_seed = (f"paper seed {spec.paper_seed}" if spec.paper_seed is not None
                  else "no paper seed: the mean over seeds is judged")
    shas = [str(r.get("git_sha", ""))[:12] for r in records]
    dirty = " (uncommitted changes)" if any(r.get("git_dirty") for r in records) else ""
    torch = _unique([(r.get("versions") or {}).get("torch") for r in records])
    parts = [
        f"Scale: {scales_of(records)}",
        f"Protocols: {', '.join(ordered_protocols(records))}",
        f"Seeds: {', '.join(map(str, seeds))} ({paper_seed})",
        f"Records: {len(records)} ({statuses.get('ok', 0)} ok, "
        f"{len(records) - statuses.get('ok', 0)} failed)",
        f"Git: {', '.join(_unique(shas)) or 'unknown'}{dirty}",
        f"torch: {', '.join(torch) or 'unknown'}",
    ]
    return " · ".join(parts)


def display_frame(spec: ArtifactSpec, table: pd.DataFrame) -> pd.DataFrame:
    """The human-readable table of one protocol: formatted numbers, gaps as ``—``."""
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


def _verdict_summary(table: pd.DataFrame) -> str:
    counts = Counter(table["verdict"])
    return ", ".join(f"{n} {verdict}" for verdict, n in counts.most_common())


def _notes(spec: ArtifactSpec, table: pd.DataFrame, records: list[dict[str, Any]]) -> list[str]:
    notes = list(spec.notes)
    notes.append(f"Verdict rule: {spec.rule.describe()}.")
    for pattern, rule in spec.rules.items():
        notes.append(f"Verdict rule for cells {'/'.join(pattern)}: {rule.describe()}.")
    notes.append(
        f"Paper values: bench/targets/{spec.paper}.csv ({', '.join(spec.target_artifacts)}); "
        "a ± is as printed, which is not always a standard error (see the CSV's note)."
    )
    spread = ("ours mean ± SE: mean over seeds ± standard error sd/√k; no SE with one seed."
              if spec.spread == "stderr" else
              "ours mean [95% CI]: mean over seeds and Student-t interval "
              "mean ± t(0.975, k-1)·sd/√k; no interval with one seed.")
    notes.append(f"{spread} n: seeds with an ok value (+ failed runs). — marks a value we do "
                 "not have; the verdict says why.")
    not_shown = sum(not spec.is_shown(row, column)
                    for row, column in zip(table["row"], table["column"], strict=True))
    if not_shown:
        notes.append(f"{not_shown} cell line(s) are in the CSV only (the tables show "
                     f"{', '.join('/'.join(p) for p in spec.table_cells)}).")
    hidden = hidden_extra_cells(spec, table, records)
    if hidden:
        notes.append(f"{hidden} reproduced cell(s) without a paper value are not shown.")
    superseded = int(table["n_superseded"].sum()) if len(table) else 0
    if superseded:
        notes.append(f"{superseded} older value(s) of rerun seeds were replaced by newer records.")
    return notes


def markdown_report(spec: ArtifactSpec, table: pd.DataFrame, anchors: pd.DataFrame,
                    records: list[dict[str, Any]], figure_name: str | None,
                    damaged: list[str] = ()) -> str:
    """The Markdown report: title, header line, one table per protocol, anchors, notes."""
    lines = [f"# {spec.paper} {spec.artifact} — {spec.title}", "", header_line(spec, records), ""]
    for protocol in ordered_protocols(records):
        part = shown_part(spec, table, protocol)
        lines += [f"## Protocol: {protocol}", ""]
        if part.empty:
            lines += ["_No table cells: the paper prints no numbers for this artifact._", ""]
            continue
        table_text = markdown_table(display_frame(spec, part))
        lines += [f"Verdicts: {_verdict_summary(part)}.", "", table_text, ""]
    if len(anchors):
        shown = anchors.assign(ours=[format_number(v) for v in anchors["ours"]])
        lines += ["## Anchors", "", markdown_table(shown), ""]
    notes = _notes(spec, table, records)
    if damaged:
        notes.append(f"{len(damaged)} damaged record(s) could not be read and are gaps here "
                     f"(rerun the artifact to redo those jobs): {'; '.join(damaged)}.")
    lines += ["## Notes", ""] + [f"- {note}" for note in notes] + [""]
    if figure_name:
        lines += [f"![{spec.paper} {spec.artifact} — {spec.title}]({figure_name})", ""]
    return "\n".join(lines)


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


def report_paths(paper: str, artifact: str, out_dir: Path) -> dict[str, Path]:
    """Where an artifact's report files go: ``<out_dir>/<paper>/<artifact>.<ext>``."""
    folder = Path(out_dir) / paper
    return {ext: folder / f"{artifact}.{ext}" for ext in ("md", "csv", "tex", "png")}


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
    the spec has a figure function, which is called as ``spec.figure(ok_records, spec)``.
    ``damaged`` names records that could not be read; the notes list them as gaps.
    A report of another scale is never replaced (ScaleConflict) unless ``replace_scale``.
    Returns the written paths. Raises ValueError when there are no records.
    """
    if not records:
        raise ValueError(f"no records to report for {spec.key}")
    paths = report_paths(spec.paper, spec.artifact, out_dir)
    previous, scale = existing_report_scale(paths["md"]), scales_of(records)
    if previous and previous != scale and not replace_scale:
        raise ScaleConflict(f"{paths['md']} holds a {previous}-scale report; a {scale}-scale "
                            "report does not replace it (choose another --out, or pass "
                            "--replace-scale)")
    table = comparison_table(spec, records)
    anchors = anchor_table(spec, records)
    written = [write_atomically(paths["csv"], table.to_csv(index=False))]
    figure_name = None
    if spec.figure is not None:
        written.append(write_atomically(paths["png"], _figure_png(spec, records)))
        figure_name = paths["png"].name
    markdown = markdown_report(spec, table, anchors, records, figure_name, damaged)
    written.append(write_atomically(paths["md"], markdown))
    written.append(write_atomically(paths["tex"], latex_report(spec, table, records)))
    return written
