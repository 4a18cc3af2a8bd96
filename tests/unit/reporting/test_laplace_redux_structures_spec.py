"""Laplace Redux Table 2 report spec: the prediction-time ratios by hand (within a seed, the
last-layer FULL stand-in left out), the paper's twelve cells, the anchors' paper values."""

from __future__ import annotations

import pytest

from bench.reporting.specs import SPECS
from bench.reporting.specs.laplace_redux_structures import ANCHORS, time_ratio
from bench.reporting.targets import paper_values

TABLE_2 = SPECS["laplace_redux/table-2"]


def record(row: str, seed: int, seconds: float, laplace_class: str = "DiagLaplace") -> dict:
    return {"method": row, "seed": seed, "status": "ok",
            "cells": [{"row": row, "column": "pred_time", "value": seconds}],
            "fitted": {"methods": {row: {"laplace_class": laplace_class}}}}


def test_time_ratios_are_taken_within_a_seed_then_averaged():
    records = [record("LA/DIAG", 1, 10.0), record("LA/KFAC", 1, 12.0, "KronLaplace"),
               record("LA/DIAG", 2, 20.0), record("LA/KFAC", 2, 30.0, "KronLaplace"),
               record("LA/KFAC", 3, 99.0, "KronLaplace"),
               record("LA/FULL", 1, 25.0, "FullLaplace")]
    assert time_ratio("LA/KFAC")(records) == pytest.approx((1.2 + 1.5) / 2)
    assert time_ratio("LA/FULL")(records) == pytest.approx(2.5)


def test_the_last_layer_stand_in_is_no_full_time_ratio():
    records = [record("LA/DIAG", 1, 10.0), record("LA/FULL", 1, 0.5, "FullLLLaplace")]
    with pytest.raises(LookupError, match="1 FULL record\\(s\\) are the last-layer stand-in"):
        time_ratio("LA/FULL")(records)
    with pytest.raises(LookupError, match="no seed has both LA/KFAC and LA/DIAG"):
        time_ratio("LA/KFAC")(records)


def test_the_spec_reads_the_papers_twelve_cells_and_its_time_ratios():
    values = paper_values("laplace_redux", TABLE_2.target_artifacts)
    cells = {key for key in values if key[0].startswith("LA/")}
    assert cells == {(row, column) for row in TABLE_2.row_order
                     for column in TABLE_2.column_order}
    full_over_diag = values[("LA/FULL", "pred_time")].value / values[("LA/DIAG",
                                                                       "pred_time")].value
    kfac_over_diag = values[("LA/KFAC", "pred_time")].value / values[("LA/DIAG",
                                                                       "pred_time")].value
    assert [float(a.paper) for a in ANCHORS] == [round(full_over_diag, 2),
                                                 round(kfac_over_diag, 2)]
