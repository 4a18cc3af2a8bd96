"""Report layout: figure, claims, compact (pivot) tables, notes, then the long table; every
table preceded by its verdict rule."""

from __future__ import annotations

import dataclasses
import math

import matplotlib
import matplotlib.figure
import pandas as pd
import pytest

from bench.reporting.markdown import heading_slug
from bench.reporting.pivot import pivot_table, split_sweep
from bench.reporting.render import render_report
from bench.reporting.spec import Anchor
from bench.reporting.specs import SPECS
from bench.reporting.verdicts import Tolerance

matplotlib.use("Agg")


def long_lines(cells: list[tuple]) -> pd.DataFrame:
    """Lines of a long table: (row, column, paper, ours, verdict)."""
    return pd.DataFrame([{"row": r, "column": c, "paper": p, "ours": o,
                          "ours_paper_seed": math.nan, "verdict": v}
                         for r, c, p, o, v in cells])


def test_split_sweep_takes_the_last_key_value_part():
    name = split_sweep("misspecified/ood/w2@k=25")
    assert (name.rest, name.key, name.value) == ("misspecified/ood/w2", "k", "25")
    assert split_sweep("angle=30/brier").rest == "brier"
    assert split_sweep("normal_normal/n=1000").value == "1000"
    assert split_sweep("cov95").key == ""


def test_pivot_over_a_column_sweep_orders_k_numerically():
    part = long_lines([
        ("Greedy", "reg/w2@k=10", "", 0.5, "no paper value"),
        ("Greedy", "reg/w2@k=1", "", 2.0, "no paper value"),
        ("Greedy", "reg/w2@k=5", "", 1.25, "no paper value"),
        ("Last k", "reg/w2@k=1", "", 3.0, "no paper value"),
        ("Last k", "reg/w2@k=5", "", math.nan, "failed"),
        ("LLA", "reg/w2", "", 0.0, "no paper value"),
    ])
    pivot = pivot_table(part)
    assert pivot.swept == "k"
    assert list(pivot.frame.columns) == ["row", "column", "(no k)", "k=1", "k=5", "k=10"]
    greedy = pivot.frame.iloc[0]
    assert (greedy["row"], greedy["k=1"], greedy["k=5"], greedy["k=10"]) == \
        ("Greedy", "2", "1.25", "0.5")
    last = pivot.frame.iloc[1]
    assert (last["k=5"], last["k=10"]) == ("— failed", "")
    assert pivot.frame.iloc[2]["(no k)"] == "0"


def test_pivot_over_a_row_sweep_and_without_sweep():
    by_n = pivot_table(long_lines([
        ("nn/n=100", "ssla_kl", "", 0.01, "no paper value"),
        ("nn/n=20", "ssla_kl", "", 0.1, "no paper value"),
        ("nn/n=20", "assla_kl", "", 0.2, "no paper value"),
    ]))
    assert list(by_n.frame.columns) == ["column", "row", "n=20", "n=100"]
    assert by_n.frame["column"].tolist() == ["ssla_kl", "assla_kl"]
    plain = pivot_table(long_lines([
        ("LA/KFAC", "cov95", "100.0", 96.0, "agrees"),
        ("LA/KFAC", "cov90", "100.0", 80.0, "differs"),
        ("VI/VI", "cov95", "92.0", 90.6667, "close"),
        ("VI/VI", "nll", "", 0.64, "no paper value"),
    ]))
    assert list(plain.frame.columns) == ["row", "cov95", "cov90", "nll"]
    assert plain.frame.iloc[0].tolist() == ["LA/KFAC", "96 (100.0) ✓", "80 (100.0) ✗", ""]
    assert plain.frame.iloc[1].tolist() == ["VI/VI", "90.67 (92.0) ≈", "", "0.64"]


def record(seed: int, value: float) -> dict:
    return {"status": "ok", "seed": seed, "protocol": "paper", "scale": "cpu",
            "method": "ssla_assla", "timings": {"total_s": 2.0},
            "started_at": "2026-01-01T00:00:00+00:00",
            "finished_at": f"2026-01-0{seed + 1}T00:00:00+00:00",
            "cells": [{"row": "N(0,1)", "column": "SSLA", "value": value},
                      {"row": "N(0,1)", "column": "ASSLA", "value": -0.0259}]}


def test_report_sections_come_in_order_each_table_after_its_rule(tmp_path):
    def figure(ok_records, spec):
        drawn = matplotlib.figure.Figure(figsize=(1, 1))
        drawn.add_subplot().plot([0, 1])
        return drawn

    spec = dataclasses.replace(
        SPECS["ssla/table-7"], figure=figure, causes={("*", "*"): "a side run shows why"},
        anchors=(Anchor("SSLA minus ASSLA", "0", lambda records: 0.5, Tolerance(abs=0.1)),))
    render_report(spec, [record(0, -0.0259), record(1, -0.0300)], tmp_path)
    text = (tmp_path / "ssla" / "table-7.md").read_text()
    order = ["](table-7.png)", "## Anchors", "## Compact table (protocol paper)", "## Notes",
             "## All cells (protocol paper)"]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)
    lines = text.splitlines()
    headers = [i for i, line in enumerate(lines)
               if line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|:")]
    assert len(headers) == 3  # anchors, compact, long
    for index in headers:
        above = [line for line in lines[:index] if line.strip()]
        rule_lines = [line for line in above[-3:] if line.startswith("Verdict rule")]
        assert rule_lines, lines[index]
    assert "Finished 2026-01-01 to 2026-01-02" in text.replace("finished", "Finished")
    assert heading_slug("All cells (protocol paper)") == "all-cells-protocol-paper"


FIGURE_SPECS = sorted(key for key, spec in SPECS.items() if spec.figure is not None)


@pytest.mark.parametrize("key", FIGURE_SPECS)
@pytest.mark.second_tier
def test_every_report_with_a_figure_shows_it_first(key, tmp_path):
    """The figure is the first thing after the title and header line, for every spec with a
    figure (its own drawing, or the drawn gap when the records cannot make it)."""
    spec = SPECS[key]
    ok = {"status": "ok", "seed": 0, "protocol": "paper", "scale": "cpu", "cells": [],
          "config": {}, "finished_at": "2026-01-01T00:00:00+00:00"}
    render_report(spec, [ok], tmp_path)
    lines = (tmp_path / spec.paper / f"{spec.artifact}.md").read_text().splitlines()
    blocks = [line for line in lines if line.strip()]
    assert blocks[0].startswith(f"# {spec.paper} {spec.artifact}")
    assert blocks[1].startswith("Scale: cpu")
    assert blocks[2] == f"![{spec.paper} {spec.artifact} — {spec.title}]({spec.artifact}.png)"
