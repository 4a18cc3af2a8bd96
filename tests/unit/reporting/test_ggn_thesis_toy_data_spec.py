"""GGN thesis Figure 5.1: the toy data sets' checksums against the reproduction notes."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from bench.reporting.compare import anchor_table
from bench.reporting.specs.ggn_thesis_toy_data import FIGURE_5_1
from bench.tasks.toy_data_sets import run, split_statistics


def test_split_statistics_of_three_labelled_points():
    x = torch.tensor([[0.0, 1.0], [2.0, -1.0], [4.0, 3.0]], dtype=torch.float64)
    y = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
    cells = split_statistics(x, y)
    assert cells["n"] == 3 and cells["positives"] == 2
    assert cells["x1_min"] == 0 and cells["x1_max"] == 4 and cells["x2_mean"] == 1
    assert cells["y_mean"] == pytest.approx(2 / 3)
    assert cells["y_sd"] == pytest.approx((2 / 9) ** 0.5)  # population sd
    assert (cells["point2/x1"], cells["point2/x2"], cells["point2/y"]) == (2, -1, 0)


def records(**dataset_overrides):
    """Records of both data sets' jobs as the task writes them."""
    made = []
    for name, target in (("snelson_gap", "bench.datasets.snelson.SnelsonGapData"),
                         ("two_moons", "bench.datasets.two_moons.TwoMoonsData")):
        cfg = OmegaConf.create({"dataset": {"_target_": target, **dataset_overrides}})
        result = run(cfg)
        made.append({"status": "ok", "seed": 0, "dataset": name, "arrays": result.arrays,
                     "versions": {"numpy": "2.4.6", "scipy": "1.17.1", "scikit-learn": "1.9.1"},
                     "cells": [{"row": c.row, "column": c.column, "value": c.value}
                               for c in result.cells]})
    return made


def test_the_generators_draw_the_notes_checksums():
    table = anchor_table(FIGURE_5_1, records())
    assert len(table) == 25
    assert set(table["verdict"]) == {"agrees"}


def test_another_training_seed_draws_other_data_and_says_so():
    table = anchor_table(FIGURE_5_1, records(train_seed=7))
    differs = table[table["verdict"] == "differs"]
    assert "Snelson with a gap: first training pair, x (notes 2.1)" in set(differs["label"])
    assert "two moons: first training point, x1 (notes 2.2)" in set(differs["label"])
    causes = dict(zip(differs["label"], differs["cause"], strict=True))
    assert "drew with numpy 2.4.6, scipy 1.17.1 (the notes: numpy 2.x, scipy 1.17)" in causes[
        "Snelson with a gap: first training pair, x (notes 2.1)"]
    assert "drew with scikit-learn 1.9.1 (the notes: scikit-learn 1.9.1)" in causes[
        "two moons: first training point, x1 (notes 2.2)"]
    sizes = table[table["label"].str.contains("points \\(")]
    assert set(sizes["verdict"]) == {"agrees"}
