"""Intervals that respect their range: hand-computed t-intervals cut at [0, 100] / [0, 1]."""

from __future__ import annotations

import dataclasses
import math

import pytest

from bench.reporting.aggregate import mean_and_ci
from bench.reporting.compare import comparison_table
from bench.reporting.formatting import format_compact, format_mean_ci, format_number
from bench.reporting.intervals import (
    FRACTION,
    PERCENT,
    cell_ranges,
    clip_interval,
    inferred_range,
    is_proportion,
    measure_name,
)
from bench.reporting.specs import SPECS
from bench.reporting.verdicts import Tolerance
from tests.helpers import with_health

T_975_DF5 = 2.5705818366147395  # Student-t 0.975 quantile, 5 degrees of freedom (tables)
# Coverage (%) of 25 test points at six seeds: multiples of 4.
COVERAGES = [84.0, 100.0, 100.0, 96.0, 100.0, 92.0]


def hand_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and t-interval by hand: sum of squared deviations / (k - 1), t * sd / sqrt(k)."""
    k = len(values)
    mean = sum(values) / k
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (k - 1))
    return mean, mean - T_975_DF5 * sd / math.sqrt(k), mean + T_975_DF5 * sd / math.sqrt(k)


def records_for(row: str, column: str, values: list[float], seeds=(42, 0, 1, 2, 3, 4)):
    return [with_health({"status": "ok", "seed": seed, "protocol": "paper", "scale": "cpu",
                         "finished_at": f"2026-01-0{i + 1}",
                         "cells": [{"row": row, "column": column, "value": value}]})
            for i, (seed, value) in enumerate(zip(seeds, values, strict=True))]


def test_hand_computed_interval_is_cut_at_100():
    mean, low, high = hand_interval(COVERAGES)
    assert mean == pytest.approx(95.333333333) and high == pytest.approx(102.0585, abs=1e-3)
    assert low == pytest.approx(88.6082, abs=1e-3)
    _, _, t_low, t_high = mean_and_ci(COVERAGES)
    assert (t_low, t_high) == (pytest.approx(low), pytest.approx(high))
    assert clip_interval(t_low, t_high, PERCENT) == (pytest.approx(low), 100.0)
    assert clip_interval(-0.2, 0.4, FRACTION) == (0.0, 0.4)
    assert clip_interval(0.3, 0.4, None) == (0.3, 0.4)
    nan_low, nan_high = clip_interval(math.nan, math.nan, PERCENT)
    assert math.isnan(nan_low) and math.isnan(nan_high)


def test_coverage_cell_shows_an_interval_inside_0_100():
    spec = SPECS["ssla/table-2"]
    table = comparison_table(spec, records_for("SSLA/KFAC", "cov95", COVERAGES))
    line = table[(table["row"] == "SSLA/KFAC") & (table["column"] == "cov95")].iloc[0]
    _, low, _ = hand_interval(COVERAGES)
    assert line["ci_low"] == pytest.approx(low) and line["ci_high"] == 100.0
    assert line["value_range"] == "[0, 100]"
    assert line["ours_paper_seed"] == 84.0 and line["verdict"] == "agrees"
    assert format_mean_ci(line["ours"], line["ci_low"], line["ci_high"]) == \
        "95.3333 [88.6082, 100]"
    assert format_number(line["ours_paper_seed"]) == "84"


@pytest.mark.parametrize(("values", "verdict"), [
    # LA/KFAC cov95 paper 100.0: mean 97.5, cut CI [94.6, 100] holds 100 inside the close
    # band 100 +- 6: agrees.
    ([100.0, 95.0, 100.0, 95.0, 100.0, 95.0], "agrees"),
    # mean 96.67, cut CI [91.2, 100] holds 100 but reaches past the band: inconclusive.
    ([100.0, 88.0, 100.0, 92.0, 100.0, 100.0], "inconclusive"),
    # every seed 84-92: CI below 100, |mean - 100| = 12 > 3 * 2: differs.
    ([88.0, 84.0, 92.0, 88.0, 84.0, 92.0], "differs"),
])
def test_verdicts_that_use_the_ci_are_unchanged_by_the_cut(values, verdict):
    spec = dataclasses.replace(SPECS["ssla/table-2"], rule=Tolerance(abs=2.0), rules={},
                               paper_seed=None)
    table = comparison_table(spec, records_for("LA/KFAC", "cov95", values))
    line = table[(table["row"] == "LA/KFAC") & (table["column"] == "cov95")].iloc[0]
    _, low, high = hand_interval(values)
    uncut_inside = low <= 100.0 <= high
    assert line["verdict"] == verdict
    assert (line["ci_low"] <= 100.0 <= line["ci_high"]) == uncut_inside
    assert line["ci_high"] <= 100.0


def test_proportions_are_told_by_name_and_unit_decides_the_scale():
    assert measure_name("misspecified/ood/cov95@k=5") == "cov95"
    for name in ("cov95", "angle=0/accuracy", "acc_mnist", "conf_fmnist", "auroc_kmnist",
                 "ood_auroc_avg", "test_acc", "ece", "frac_nonfinite", "train_accuracy"):
        assert is_proportion(name), name
    for name in ("brier", "nll", "prediction_runtime_overhead", "covariance", "conflict",
                 "SSLA-ASSLA", "w2@k=5", "decisiveness"):
        assert not is_proportion(name), name
    assert inferred_range([0.2, 0.99]) == FRACTION
    assert inferred_range([0.2, 99.0]) == PERCENT
    assert inferred_range([-1.0, 2.0]) is None and inferred_range([math.nan]) is None


def test_cell_ranges_follow_spec_unit_then_values():
    spec = dataclasses.replace(SPECS["ssla/table-2"], value_ranges={("X", "nll"): (0.0, 5.0)})
    cells = {("paper", "A", "angle=0/accuracy"): [0.9, 0.95],
             ("paper", "A", "angle=0/brier"): [1.4, 1.2],
             ("paper", "A", "cov95"): [0.5],
             ("paper", "X", "nll"): [1.0],
             ("paper", "A", "prediction_runtime_overhead"): [250.0]}
    units = {("A", "cov95"): "%", ("*", "prediction_runtime_overhead"): "%"}
    ranges = cell_ranges(spec, cells, units)
    assert ranges[("paper", "A", "angle=0/accuracy")] == FRACTION  # all proportions <= 1
    assert ranges[("paper", "A", "cov95")] == PERCENT  # the paper's unit wins
    assert ranges[("paper", "A", "angle=0/brier")] is None
    assert ranges[("paper", "X", "nll")] == (0.0, 5.0)  # the spec's range
    assert ranges[("paper", "A", "prediction_runtime_overhead")] is None  # a unit alone: no


def test_integer_values_print_as_integers():
    assert format_number(84.0) == "84" and format_number(-3.0) == "-3"
    assert format_number(95.33333333) == "95.3333" and format_number(9.41e-6) == "9.410e-06"
    assert format_compact(0.0123456) == "0.01235" and format_compact(96.0) == "96"
    assert format_compact(math.nan) == "—"
