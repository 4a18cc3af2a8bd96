"""Paper rows apart from studies in summaries written before the split existed.

A summary of schema 3 or later flags every cell and claim it lists as a study or not
(:meth:`bench.reporting.spec.ArtifactSpec.is_study`) and counts the two apart. An older
summary is split here from its spec and the CSV beside it (every cell's protocol, row and
verdict as rendered then): the flags and counts follow the spec, the verdicts stay the old
ones, and the scoreboard says which verdict rules they were judged under.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from bench.reporting.files import report_paths
from bench.reporting.spec import ArtifactSpec
from bench.reporting.summary import under_verdict_rules, verdict_counts

CORRECTED_CLAIM = "[protocol corrected]"


def _is_study_claim(spec: ArtifactSpec, anchor: dict[str, Any]) -> bool:
    return spec.study or CORRECTED_CLAIM in str(anchor.get("label", ""))


def split_older_summary(summary: dict[str, Any], spec: ArtifactSpec,
                        out_dir: Path) -> dict[str, Any]:
    """``summary`` with study flags and split counts (a copy); unchanged when it already has
    them (schema ``VERDICT_RULES_SINCE`` or later)."""
    if under_verdict_rules(summary):
        return summary
    split = {**summary}
    split["unconfirmed_cells"] = [
        {**cell, "study": spec.is_study(cell.get("protocol", ""), cell.get("row", ""))}
        for cell in summary.get("unconfirmed_cells") or []]
    split["anchors"] = [{**anchor, "study": _is_study_claim(spec, anchor)}
                        for anchor in summary.get("anchors") or []]
    split["anchor_counts"] = verdict_counts(
        a["verdict"] for a in split["anchors"] if not a["study"])
    split["study_anchor_counts"] = verdict_counts(
        a["verdict"] for a in split["anchors"] if a["study"])
    csv = report_paths(spec.paper, spec.artifact, out_dir)["csv"]
    if summary.get("status") == "records" and csv.is_file():
        table = pd.read_csv(csv, dtype={"protocol": str, "row": str}, keep_default_na=False)
        study = [spec.is_study(p, r) for p, r in zip(table["protocol"], table["row"],
                                                      strict=True)]
        table = table.assign(study=study)
        protocols = list(summary.get("counts") or {})
        split["counts"] = {p: verdict_counts(table.loc[(table["protocol"] == p)
                                                       & ~table["study"], "verdict"])
                           for p in protocols}
        split["study_counts"] = {p: verdict_counts(table.loc[(table["protocol"] == p)
                                                             & table["study"], "verdict"])
                                 for p in protocols}
    return split


def split_summaries(summaries: dict[str, dict[str, Any]], specs: dict[str, ArtifactSpec],
                    out_dir: Path) -> dict[str, dict[str, Any]]:
    """Every summary split (:func:`split_older_summary`) where its spec is registered."""
    return {key: (split_older_summary(summary, specs[key], out_dir) if key in specs
                  else summary)
            for key, summary in summaries.items()}
