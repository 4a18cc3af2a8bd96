"""Figure bands stay inside their metric's range: the 95% Student-t band over three seeds
leaves ``[0, 1]`` (or goes below 0) for values near the bound, and every figure cuts it with
:func:`bench.reporting.intervals.clip_band` at :func:`~bench.reporting.intervals.measure_range`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.collections import PolyCollection

from bench.reporting.aggregate import mean_and_ci
from bench.reporting.figures.structures_plots import temperature_curves
from bench.reporting.figures.subnet_plots import coverage_curves, w2_curves
from bench.reporting.figures.wilds_plots import wilds_figure
from bench.reporting.intervals import (
    FRACTION,
    NONNEGATIVE,
    PERCENT,
    clip_band,
    measure_range,
)
from bench.reporting.specs import SPECS

# Three seeds near the lower bound: mean 0.1, t-band 0.1 ± 4.303 * 0.1732 / sqrt(3) (below 0).
NEAR_ZERO = (0.0, 0.0, 0.3)
# Three seeds near the upper bound of a fraction: the band's top is above 1.
NEAR_ONE = (1.0, 1.0, 0.7)


def seed_records(cells: dict[tuple[str, str], tuple[float, ...]]) -> list[dict]:
    """One ok record per seed holding ``cells[(row, column)][seed]``."""
    n_seeds = len(next(iter(cells.values())))
    return [{"status": "ok", "seed": seed, "protocol": "paper", "scale": "cpu",
             "config": {}, "finished_at": f"2026-01-0{seed + 1}T00:00:00+00:00",
             "cells": [{"row": row, "column": column, "value": values[seed]}
                       for (row, column), values in cells.items()]}
            for seed in range(n_seeds)]


def band_heights(ax) -> np.ndarray:
    """The y coordinates of every filled band drawn on ``ax`` (fill_between / axhspan)."""
    heights = [path.vertices[:, 1] for collection in ax.collections
               if isinstance(collection, PolyCollection) for path in collection.get_paths()]
    heights += [patch.get_path().transformed(patch.get_patch_transform()).vertices[:, 1]
                for patch in ax.patches]
    assert heights, "no band drawn"
    return np.concatenate(heights)


def test_the_uncut_band_of_these_seeds_leaves_the_range():
    _, _, low, _ = mean_and_ci(list(NEAR_ZERO))
    _, _, _, high = mean_and_ci(list(NEAR_ONE))
    assert low < -0.2 and high > 1.2


def test_measure_range_knows_proportions_and_bounded_measures():
    assert measure_range("angle=30/accuracy", [0.9, 0.1]) == FRACTION
    assert measure_range("accuracy", [91.0, 12.0]) == PERCENT
    assert measure_range("ood/auroc@T=0.1", [0.7]) == FRACTION
    assert measure_range("regression/misspecified/cov95@k=10", [0.95]) == FRACTION
    assert measure_range("brier", [0.3]) == (0.0, 2.0)
    assert measure_range("mnist/entropy@T=1", [0.2]) == NONNEGATIVE
    assert measure_range("misspecified/ood/w2@k=5", [3.0]) == NONNEGATIVE
    assert measure_range("nll", [-1.0]) is None  # a Gaussian NLL can be negative
    assert measure_range("accuracy", [150.0]) is None  # no range can be told


def test_clip_band_cuts_each_end_and_keeps_missing_ends():
    lows, highs = clip_band([-0.3, 0.2, math.nan], [0.5, 1.4, math.nan], FRACTION)
    assert lows[:2] == [0.0, 0.2] and highs[:2] == [0.5, 1.0]
    assert math.isnan(lows[2]) and math.isnan(highs[2])
    assert clip_band([-5.0], [3.0], None) == ([-5.0], [3.0])


def test_figure_9_accuracy_and_brier_bands_stay_in_their_range():
    angles = (0, 15, 30)
    cells = {}
    for row in ("MAP", "LA"):
        cells.update({(row, f"angle={a}/accuracy"): NEAR_ZERO if a == 30 else NEAR_ONE
                      for a in angles})
        cells.update({(row, f"angle={a}/brier"): NEAR_ZERO for a in angles})
    figure = SPECS["laplace_redux/figure-9"].figure(seed_records(cells), None)
    brier_axis, accuracy_axis = figure.axes
    accuracy = band_heights(accuracy_axis)
    assert accuracy.min() == pytest.approx(0.0) and accuracy.max() == pytest.approx(1.0)
    assert band_heights(brier_axis).min() == pytest.approx(0.0)


def test_temperature_curve_bands_stay_in_their_range():
    cells = {}
    for row in ("Diag", "KFAC"):
        for t in (0.1, 1.0):
            cells[(row, f"mnist/accuracy@T={t}")] = NEAR_ONE
            cells[(row, f"mnist/entropy@T={t}")] = NEAR_ZERO
            cells[(row, f"fmnist/auroc@T={t}")] = NEAR_ZERO
    draw = temperature_curves((("mnist", "accuracy"), ("mnist", "entropy"),
                               ("fmnist", "auroc")))
    accuracy_axis, entropy_axis, auroc_axis = draw(seed_records(cells)).axes
    assert band_heights(accuracy_axis).max() == pytest.approx(1.0)
    assert band_heights(entropy_axis).min() == pytest.approx(0.0)
    assert band_heights(auroc_axis).min() == pytest.approx(0.0)


@pytest.mark.second_tier
def test_subnetwork_coverage_and_w2_bands_stay_in_their_range():
    coverage, w2 = {}, {}
    for likelihood in ("regression", "classification"):
        for specification in ("misspecified", "wellspecified"):
            panel = f"{likelihood}/{specification}"
            coverage.update({("Last k", f"{panel}/cov95@k={k}"): NEAR_ONE for k in (1, 10)})
            coverage[("LLA", f"{panel}/cov95")] = NEAR_ZERO
    for specification in ("misspecified", "wellspecified"):
        for domain in ("in_distribution", "ood", "mixed"):
            panel = f"{specification}/{domain}"
            w2.update({("Last k", f"{panel}/w2@k={k}"): NEAR_ZERO for k in (1, 10)})
            w2[("NeuralLinear", f"{panel}/w2")] = NEAR_ZERO
    for ax in coverage_curves(seed_records(coverage)).axes:
        heights = band_heights(ax)
        assert heights.min() == pytest.approx(0.0) and heights.max() == pytest.approx(1.0)
    for ax in w2_curves(seed_records(w2)).axes:
        assert band_heights(ax).min() >= 0.0


def test_wilds_error_bars_stay_in_their_range():
    cells = {("camelyon17/MAP", "id/accuracy"): NEAR_ONE,
             ("camelyon17/LA", "ood/accuracy"): NEAR_ONE,
             ("camelyon17/MAP", "id/ece"): NEAR_ZERO,
             ("camelyon17/MAP", "id/brier"): NEAR_ZERO}
    figure = wilds_figure(seed_records(cells))
    ends = []
    for ax in figure.axes:
        for container in ax.containers:
            if getattr(container, "errorbar", None) is not None:
                for segments in container.errorbar.lines[2]:
                    ends += [y for segment in segments.get_segments() for _, y in segment]
    assert ends and min(ends) == pytest.approx(0.0) and max(ends) == pytest.approx(1.0)
