"""The map-recipe study's report says only what its records show: a mean over seeds within
tolerance does not hide a seed that is not, and no note claims a per-seed outcome."""

from __future__ import annotations

import pytest

from bench.reporting.causes.laplace_redux import JUDGED, PAPER_MAP, per_seed_outcome, row_name
from bench.reporting.claims import cell_means
from bench.reporting.specs.laplace_redux_map_recipe import MAP_RECIPE, largest_gap, worst_seed_gap


def study_record(recipe: str, seed: int, offsets: dict[str, float]) -> dict:
    """An ok record of ``recipe``'s MAP row: the paper's MAP cells plus ``offsets``."""
    return {"status": "ok", "seed": seed, "protocol": "paper", "scale": "cpu",
            "config": {"map_recipe": recipe},
            "cells": [{"row": row_name(recipe, "MAP"), "column": column,
                       "value": PAPER_MAP[column] + offsets.get(column, 0.0)}
                      for column in JUDGED]}


def test_a_seed_outside_tolerance_shows_although_the_mean_is_inside():
    # Two seeds on either side of the paper's FMNIST confidence: the mean is on it, each seed
    # is 2.2 tolerances away (the case of adam_b128's 68.6 and 62.5 against 64.2).
    off = 2.2 * JUDGED["conf_fmnist"]
    records = [study_record("adam_b128", 6, {"conf_fmnist": off}),
               study_record("adam_b128", 12, {"conf_fmnist": -off})]
    assert largest_gap("adam_b128")(cell_means(records)) == pytest.approx(0.0, abs=1e-9)
    assert worst_seed_gap("adam_b128")(records) == pytest.approx(2.2)
    cause = per_seed_outcome("adam_b128")(records)
    assert cause.startswith("measured per seed: seed 6: conf_fmnist "
                            f"{PAPER_MAP['conf_fmnist'] + off:.1f}")
    assert f"seed 12: conf_fmnist {PAPER_MAP['conf_fmnist'] - off:.1f}" in cause


def test_worst_seed_gap_needs_the_recipes_cells():
    with pytest.raises(LookupError):
        worst_seed_gap("adam_b512")([study_record("adam_b128", 6, {})])


def test_no_note_or_cause_claims_a_recipe_reproduces_the_paper():
    texts = [*MAP_RECIPE.notes, *(c for c in MAP_RECIPE.causes.values() if isinstance(c, str))]
    assert not [text for text in texts if "reproduce" in text]
