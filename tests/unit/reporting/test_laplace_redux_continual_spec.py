"""The continual-learning report: matrices and curves parsed from cells, the setup anchors read
from the targets file and judged against the records, the K-FAC vs diagonal claim."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench.harness.result import CELL_UNITS, NEUTRAL_CELLS
from bench.reporting.figures.continual_plots import accuracy_matrix, mean_curve
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from bench.reporting.specs.laplace_redux_continual import kfac_minus_diag, setup_value

SPEC = SPECS["laplace_redux/continual-learning"]


def record(row: str, seed: int, accuracies: dict[tuple[int, int], float], n_tasks: int = 2,
           layers=(784, 100, 100, 10)) -> dict:
    """An ok record with Laplace and network-argmax matrix cells from ``{(t, s): value}``
    (the network's 1 point lower) and ``fitted`` saying it ran ``n_tasks`` tasks."""
    cells = []
    for prefix, shift in (("", 0.0), ("map/", -1.0)):
        for (t, s), value in accuracies.items():
            cells.append({"row": row, "column": f"{prefix}after={t}/task={s}",
                          "value": value + shift})
        for t in sorted({t for t, _ in accuracies}):
            seen = [v + shift for (a, _), v in accuracies.items() if a == t]
            cells.append({"row": row, "column": f"{prefix}after={t}/mean",
                          "value": sum(seen) / len(seen)})
    last = max(t for t, _ in accuracies)
    final = [v for (t, _), v in accuracies.items() if t == last]
    cells.append({"row": row, "column": "mean_accuracy", "value": sum(final) / len(final)})
    return {"status": "ok", "seed": seed, "protocol": "paper", "cells": cells,
            "config": {"method": {"hessian_structure": row}}, "scale": "smoke",
            "fitted": {"n_tasks": n_tasks, "network_layers": list(layers)}}


KFAC = {(1, 1): 98.0, (2, 1): 96.0, (2, 2): 97.0}
DIAG = {(1, 1): 98.0, (2, 1): 90.0, (2, 2): 97.0}


def test_matrix_and_curve_parse_the_cells():
    means = {(c["row"], c["column"]): c["value"] for c in record("KFAC", 0, KFAC)["cells"]}
    laplace = accuracy_matrix(means, "KFAC", network=False)
    assert laplace[0][0] == 98.0 and math.isnan(laplace[0][1]) and laplace[1] == [96.0, 97.0]
    assert accuracy_matrix(means, "KFAC", network=True)[1] == [95.0, 96.0]
    assert mean_curve(means, "KFAC", network=False) == [(1, 98.0), (2, 96.5)]
    assert mean_curve(means, "KFAC", network=True) == [(1, 97.0), (2, 95.5)]


def test_kfac_minus_diag_is_the_difference_of_mean_accuracies():
    assert kfac_minus_diag({("KFAC", "mean_accuracy"): 96.5, ("DIAG", "mean_accuracy"): 93.5}) \
        == pytest.approx(3.0)
    with pytest.raises(LookupError, match="DIAG"):
        kfac_minus_diag({("KFAC", "mean_accuracy"): 96.5})


def test_setup_anchors_come_from_the_targets_file():
    assert [setup_value(c) for c in ("tasks", "hidden_layers", "hidden_units", "input_dim",
                                     "output_dim")] == ["10", "2", "100", "784", "10"]


@pytest.mark.second_tier
def test_report_judges_setup_and_claim_from_the_records(tmp_path):
    records = [record("KFAC", 711, KFAC, n_tasks=10), record("DIAG", 711, DIAG, n_tasks=10)]
    written = render_report(SPEC, records, tmp_path)
    assert {p.suffix for p in written} == {".csv", ".md", ".tex", ".png"}
    text = next(p for p in written if p.suffix == ".md").read_text()
    anchors = text.split("## Anchors")[1].split("## Notes")[0]
    lines = {line.split("|")[1].strip(): line for line in anchors.splitlines()
             if line.startswith("| ")}
    assert "agrees" in lines["setup (appendix C.4): number of tasks"]
    assert "agrees" in lines["setup (appendix C.4): units per hidden layer"]
    claim = lines["KFAC minus DIAG mean accuracy after the last task (points)"]
    assert claim.split("|")[3].strip() == "3" and "agrees" in claim  # integers print as such
    frame = pd.read_csv(next(p for p in written if p.suffix == ".csv"))
    kfac = frame[(frame["row"] == "KFAC") & (frame["column"] == "mean_accuracy")].iloc[0]
    assert kfac["verdict"] == "no paper value" and kfac["ours"] == pytest.approx(96.5)
    smoke = [record("KFAC", 711, KFAC, n_tasks=3), record("DIAG", 711, DIAG, n_tasks=3)]
    text = next(p for p in render_report(SPEC, smoke, tmp_path / "smoke")
                if p.suffix == ".md").read_text()
    assert "| setup (appendix C.4): number of tasks" in text
    assert any("number of tasks" in line and "differs" in line for line in text.splitlines())


def neutral(old_style: dict) -> dict:
    """The same record as a task writing neutral cells writes it: fractions, marked."""
    cells = [{**cell, "value": cell["value"] / 100} for cell in old_style["cells"]]
    return {**old_style, "cells": cells,
            "fitted": {**old_style["fitted"], CELL_UNITS: NEUTRAL_CELLS}}


@pytest.mark.second_tier
def test_old_percent_and_new_fraction_records_render_to_one_table_in_percent(tmp_path):
    old = record("KFAC", 711, KFAC, n_tasks=10)  # written before cells were neutral: %
    new = neutral(record("KFAC", 1, {(1, 1): 97.0, (2, 1): 93.0, (2, 2): 96.0}, n_tasks=10))
    assert new["cells"][0]["value"] < 1 and "cell_units" not in old["fitted"]
    written = render_report(SPEC, [old, new, record("DIAG", 711, DIAG, n_tasks=10)], tmp_path)
    frame = pd.read_csv(next(p for p in written if p.suffix == ".csv"))
    kfac = frame[(frame["row"] == "KFAC") & (frame["column"] == "mean_accuracy")].iloc[0]
    assert kfac["ours"] == pytest.approx((96.5 + 94.5) / 2)  # both seeds in %
    network = frame[(frame["row"] == "KFAC") & (frame["column"] == "map/after=2/mean")]
    assert network.iloc[0]["ours"] == pytest.approx((95.5 + 93.5) / 2)


def test_the_percent_view_goes_by_the_mark_and_converts_once():
    old = record("KFAC", 711, KFAC)
    assert SPEC.record_view(old) is old
    new = neutral(record("KFAC", 711, KFAC))
    shown = SPEC.record_view(new)
    assert [c["value"] for c in shown["cells"]] == pytest.approx(
        [c["value"] for c in old["cells"]])
    assert SPEC.record_view(shown) == shown
