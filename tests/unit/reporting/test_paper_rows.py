"""Rows judged against a paper row of another name (``ArtifactSpec.paper_rows``): a study's
``<recipe> / MAP`` rows take the paper's MAP values; the paper's own rows are left out."""

from __future__ import annotations

import pytest

from bench.reporting.compare import comparison_table
from bench.reporting.spec import ArtifactSpec
from bench.reporting.specs import SPECS
from bench.reporting.verdicts import Tolerance

STUDY = ArtifactSpec(paper="laplace_redux", artifact="map-recipe", title="t",
                     target_artifacts=("table-3",), ignore_targets=(("*", "*_emnist"),),
                     paper_rows={"* / MAP": "MAP", "* / LA": "LA", "* / LA[*]": "LA*"},
                     rules={("*", "conf_*"): Tolerance(abs=2.0, use_ci=False)},
                     causes={("*", "*"): "the recipe"})


def record(recipe: str, cells: dict[tuple[str, str], float], seed: int = 6) -> dict:
    return {"status": "ok", "protocol": "paper", "seed": seed, "scale": "cpu",
            "config": {"recipe": recipe},
            "cells": [{"row": f"{recipe} / {row}", "column": column, "value": value}
                      for (row, column), value in cells.items()]}


def test_study_rows_take_the_values_of_the_paper_row_they_map_to():
    records = [record("a", {("MAP", "conf_fmnist"): 65.0, ("LA*", "conf_fmnist"): 60.0}),
               record("b", {("MAP", "conf_fmnist"): 76.6, ("LA", "prior_precision"): 3.2})]
    table = comparison_table(STUDY, records).set_index(["row", "column"])
    assert table.loc[("a / MAP", "conf_fmnist"), "paper"] == "64.2"
    assert table.loc[("a / MAP", "conf_fmnist"), "verdict"] == "agrees"
    assert table.loc[("b / MAP", "conf_fmnist"), "verdict"] == "differs"
    assert table.loc[("b / MAP", "conf_fmnist"), "cause"] == "the recipe"
    assert table.loc[("a / LA*", "conf_fmnist"), "paper"] == "49.6"
    assert table.loc[("b / LA", "conf_kmnist"), "paper"] == "69.0"
    assert table.loc[("b / LA", "prior_precision"), "verdict"] == "no paper value"
    # The paper's rows appear only through the mapped rows; ignored columns stay out.
    rows = set(table.index.get_level_values("row"))
    assert not rows & {"MAP", "LA", "LA*", "DE"}
    assert not any(column.endswith("_emnist") for column in table.index.get_level_values(1))


@pytest.mark.parametrize(("row", "paper_row"), [("x / LA", "LA"), ("x / LA*", "LA*"),
                                                ("x / MAP", "MAP"), ("MAP", None)])
def test_the_glob_star_of_la_star_is_literal(row, paper_row):
    assert SPECS["laplace_redux/map-recipe"].paper_row(row) == paper_row
