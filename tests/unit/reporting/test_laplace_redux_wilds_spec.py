"""Figure 10's report spec: what it says is missing, and its anchors on hand-made records."""

from __future__ import annotations

import pytest

from bench.reporting.data_needs import render_needs_data
from bench.reporting.specs import SPECS
from bench.reporting.specs.laplace_redux_wilds import (
    WildsNeed,
    checkpoint_patterns,
    competitive_ood,
    laplace_mean_shift,
    no_worse,
    seeds_run,
)
from tests.wilds_fixtures import write_camelyon17, write_checkpoints

SPEC = SPECS["laplace_redux/figure-10"]


def test_need_is_empty_once_data_and_every_checkpoint_are_there(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.setenv("BENCH_WILDS_CHECKPOINTS", str(tmp_path / "c"))
    need = WildsNeed("wilds_camelyon17")
    assert "camelyon17_v1.0/metadata.csv" in need.missing_message(tmp_path)
    write_camelyon17(tmp_path, np.random.default_rng(0))
    message = need.missing_message(tmp_path)
    assert "data " not in message and "camelyon17_erm_ID_seed{0..9}.pth" in message
    for seed in range(10):
        write_checkpoints(tmp_path / "c", "camelyon17", seed)
    assert need.missing_message(tmp_path) == ""


def test_checkpoint_patterns_show_the_seed_and_fold_ranges():
    from omegaconf import OmegaConf

    from bench.harness.overrides import CONF_DIR

    poverty = OmegaConf.load(CONF_DIR / "dataset" / "wilds_poverty.yaml")
    assert checkpoint_patterns(poverty)[0] == "poverty/poverty_erm_fold{A..E}.pth"
    fmow = OmegaConf.load(CONF_DIR / "dataset" / "wilds_fmow.yaml")
    assert checkpoint_patterns(fmow)[-1] == "fmow/fmow_erm_ID_seed{0..2}.pth"


def test_needs_data_report_lists_the_checks_waiting(tmp_path):
    written = render_needs_data(SPEC, ["line one"], tmp_path)
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "## Anchors (checked once records exist)" in text and "| Camelyon17: model seeds" in text
    assert "| 10000 " in text  # the paper's Monte Carlo draws, from the targets file


def test_claim_statistics_by_hand():
    means = {("camelyon17/LA", "id/ece"): 0.02, ("camelyon17/MAP", "id/ece"): 0.05,
             ("camelyon17/LA", "ood/ece"): 0.10, ("camelyon17/MAP", "ood/ece"): 0.08,
             ("poverty/LA", "ood/calibration"): 1.0, ("poverty/MAP", "ood/calibration"): 2.0,
             ("camelyon17/TS", "ood/ece"): 0.12, ("camelyon17/DE", "ood/ece"): 0.05,
             ("fmow/LA", "ood/ece"): 0.2, ("fmow/TS", "ood/ece"): 0.1,
             ("fmow/DE", "ood/ece"): 0.15}
    calibration = no_worse("LA", "MAP", lambda d: "calibration" if d == "poverty" else "ece")
    assert calibration(means) == pytest.approx(2 / 3)
    # camelyon17: 0.10 <= max(0.12, 0.05); fmow: 0.2 > max(0.1, 0.15).
    assert competitive_ood(means) == 0.5


def test_setup_and_mean_anchors_from_records():
    def record(seed, method, column, value, dataset="poverty"):
        return {"seed": seed, "method": method, "config": {"dataset": {"wilds_name": dataset}},
                "cells": [{"row": f"{dataset}/{method}", "column": column, "value": value}]}

    records = [record(0, "LA", "id/mse", 1.5), record(0, "MAP", "id/mse", 1.5),
               record(1, "LA", "ood/mse", 2.0), record(1, "MAP", "ood/mse", 2.25),
               record(3, "MAP", "id/nll", 1.0, "fmow")]
    assert seeds_run("poverty")(records) == 2 and seeds_run("fmow")(records) == 1
    assert laplace_mean_shift(records) == 0.25
    with pytest.raises(LookupError):
        seeds_run("amazon")(records)
