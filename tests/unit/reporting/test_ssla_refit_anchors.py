"""The SSLA reports' refit-convergence anchors: shown and counted only where the records ran
the opt-in converged refit (``method.refit=newton``)."""

from __future__ import annotations

from bench.reporting.compare import anchor_table
from bench.reporting.specs.ssla_nn import REFIT_LABELS, TABLE_2
from tests.helpers import with_health


def _record(metrics: dict, fitted: dict) -> dict:
    return with_health({"status": "ok", "cells": [], "metrics": metrics, "fitted": fitted})


def test_one_step_refit_records_show_no_refit_anchors():
    """Records of the default one-step refit carry no refit metrics: the anchors are left out
    rather than reported missing."""
    records = [_record({"SSLA/KFAC/rmse": 1.0}, {"SSLA/KFAC": {"tau": 1.0}})]
    labels = set(anchor_table(TABLE_2, records)["label"])
    assert not labels & set(REFIT_LABELS)


def test_converged_refit_records_count_the_refits_and_maps_that_stopped_short():
    records = [
        _record({"SSLA/KFAC/refit_not_converged": 3.0, "SSLA/DIAG/refit_not_converged": 0.0},
                {"SSLA/KFAC": {"base_map_converged": False},
                 "SSLA/DIAG": {"base_map_converged": True}}),
        _record({"SSLA/KFAC/refit_not_converged": 2.0},
                {"SSLA/KFAC": {"base_map_converged": True}}),
    ]
    lines = anchor_table(TABLE_2, records).set_index("label")
    assert lines.loc[REFIT_LABELS[0], "ours"] == 5.0
    assert lines.loc[REFIT_LABELS[1], "ours"] == 1.0
    assert lines.loc[REFIT_LABELS[0], "verdict"] != "agrees"


def test_converged_refits_that_all_reached_the_tolerance_agree():
    records = [_record({"SSLA/DENSE/refit_not_converged": 0.0},
                       {"SSLA/DENSE": {"base_map_converged": True}})]
    lines = anchor_table(TABLE_2, records).set_index("label")
    assert lines.loc[REFIT_LABELS[0], "verdict"] == "agrees"
    assert lines.loc[REFIT_LABELS[1], "verdict"] == "agrees"
