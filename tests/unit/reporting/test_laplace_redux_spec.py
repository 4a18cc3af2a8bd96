"""Laplace Redux report specs: the anchor statistics by hand, cell-level "needs data",
standard errors and the cells the tables show."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.harness.result import CELL_UNITS, NEUTRAL_CELLS
from bench.reporting.compare import comparison_table
from bench.reporting.formatting import format_mean_stderr
from bench.reporting.render import display_frame, render_report
from bench.reporting.specs import SPECS
from bench.reporting.specs.laplace_redux import (
    fmnist_easiest,
    no_worse_than_map,
    prediction_time_ratio,
    shift_monotone,
    swap_position,
)
from bench.reporting.targets import paper_values
from tests.helpers import with_health
from tests.unit.datasets.image_fixtures import write_mnist_like

TABLE_3 = SPECS["laplace_redux/table-3"]


def test_swap_position_is_minus_one_at_the_paper_fmnist_value_and_one_at_emnist():
    position = swap_position("conf")
    assert position({("SWAG", "conf_fmnist"): 84.0}) == -1.0
    assert position({("SWAG", "conf_fmnist"): 64.9}) == 1.0
    assert position({("SWAG", "conf_fmnist"): 70.0}) == pytest.approx((14.0 - 5.1) / 19.1)
    assert swap_position("auroc")({("SWAG", "auroc_fmnist"): 96.25}) == pytest.approx(0.0)
    with pytest.raises(LookupError):
        position({("MAP", "conf_fmnist"): 60.0})


def test_fmnist_is_easiest_for_every_paper_row_but_swag():
    means = {key: value.value for key, value in
             paper_values("laplace_redux", ("table-3",)).items()}
    assert fmnist_easiest(swag=False)(means) == 1.0
    assert fmnist_easiest(swag=True)(means) == 0.0
    # Without EMNIST only KMNIST is compared: SWAG's FMNIST 84.0 > KMNIST 78.5 still fails.
    no_emnist = {k: v for k, v in means.items() if not k[1].endswith("_emnist")}
    assert fmnist_easiest(swag=True)(no_emnist) == 0.0


def test_prediction_time_ratio_is_the_mean_of_the_per_record_ratios():
    records = [{"timings": {"LA/predict_s": 3.0, "LA/map_predict_s": 2.0}},
               {"timings": {"LA/predict_s": 1.0, "LA/map_predict_s": 1.0}},
               {"timings": {"MAP/predict_s": 1.0, "MAP/map_predict_s": 1.0}}]
    assert prediction_time_ratio("LA")(records) == pytest.approx((1.5 + 1.0) / 2)
    with pytest.raises(LookupError):
        prediction_time_ratio("DE")(records)


def test_shift_statistics_by_hand():
    means = {("MAP", "angle=0/brier"): 0.1, ("MAP", "angle=45/brier"): 0.5,
             ("MAP", "angle=90/brier"): 0.4, ("MAP", "angle=180/brier"): 0.2,
             ("LA", "angle=0/brier"): 0.1, ("LA", "angle=45/brier"): 0.4,
             ("LA", "angle=90/brier"): 0.6, ("LA", "angle=180/brier"): 0.2}
    # Up to 90: MAP rises then falls (1 of 2), LA rises twice (2 of 2).
    assert shift_monotone("brier", rising=True, up_to=90.0)(means) == pytest.approx(3 / 4)
    # From 45 on, LA <= MAP at 45 and 180, not at 90.
    assert no_worse_than_map("LA", "brier", 45.0)(means) == pytest.approx(2 / 3)


def test_emnist_cells_need_data_until_the_files_are_there(tmp_path):
    message = TABLE_3.data_gap("LA", "conf_emnist", str(tmp_path))
    assert message.startswith("image data set 'emnist_digits_torchvision' (test split) not "
                              "found: put emnist-digits-test-images-idx3-ubyte.gz")
    assert "$BENCH_DATA_DIR/emnist/" in message
    assert TABLE_3.data_gap("LA", "conf_fmnist", str(tmp_path)) == ""
    write_mnist_like(tmp_path / "emnist", np.random.default_rng(0),
                     prefixes=("emnist-digits-train", "emnist-digits-test"), sizes=(4, 4))
    assert TABLE_3.data_gap("LA", "conf_emnist", str(tmp_path)) == ""


def test_table_3_shows_mean_and_standard_error_over_seeds():
    values = [61.5, 62.0, 62.5]
    records = [with_health({"status": "ok", "seed": seed, "protocol": "paper", "scale": "cpu",
                            "finished_at": "2026",
                            "cells": [{"row": "LA", "column": "conf_fmnist", "value": v}]})
               for seed, v in zip((6, 12, 13), values, strict=True)]
    table = comparison_table(TABLE_3, records)
    line = table[(table["row"] == "LA") & (table["column"] == "conf_fmnist")].iloc[0]
    stderr = float(np.std(values, ddof=1)) / math.sqrt(3)
    assert line["stderr"] == pytest.approx(stderr) and line["ours"] == pytest.approx(62.0)
    # |62.0 - 58.8| = 3.2 > 2 points, and 58.8 is outside our 95% CI: close (within 6).
    assert line["verdict"] == "close"
    shown = display_frame(TABLE_3, pd.DataFrame([line]))
    assert shown["ours mean ± SE"].iloc[0] == format_mean_stderr(62.0, stderr) \
        == "62 ± 0.288675"  # an integer value prints as an integer
    index = table.index[(table["row"] == "LA") & (table["column"] == "conf_fmnist")][0]
    # 58.8 now inside our 95% CI, but the CI is not used: mean 60.83 is 2.03 away: close.
    records[0]["cells"][0]["value"] = 58.0
    assert comparison_table(TABLE_3, records)["verdict"].iloc[index] == "close"
    records[0]["cells"][0]["value"] = 57.0  # mean 60.5, 1.7 points away: agrees
    assert comparison_table(TABLE_3, records)["verdict"].iloc[index] == "agrees"


def test_figure_9_tables_show_brier_and_accuracy_at_five_angles():
    spec = SPECS["laplace_redux/figure-9"]
    assert spec.is_shown("LA", "angle=90/brier") and spec.is_shown("MAP", "angle=0/accuracy")
    assert not spec.is_shown("LA", "angle=15/brier")
    assert not spec.is_shown("LA", "angle=90/nll")


def test_shift_anchor_cause_names_each_failing_level_with_its_paired_spread():
    from bench.reporting.causes.laplace_redux import levels_worse_than_map

    def record(seed, la_at_30):
        return {"seed": seed, "cells": [
            {"row": "MAP", "column": "angle=15/brier", "value": 0.30},
            {"row": "MAP", "column": "angle=30/brier", "value": 0.40},
            {"row": "LA", "column": "angle=15/brier", "value": 0.20},
            {"row": "LA", "column": "angle=30/brier", "value": la_at_30}]}

    cause = levels_worse_than_map("LA", "brier", 15.0)([record(6, 0.41), record(12, 0.44)])
    assert cause == ("measured in these records: LA's brier above MAP's at 30: +0.0250 "
                     "(paired SE 0.0150, 2 seeds: 1.7 SE, inside the seed spread)")
    far = levels_worse_than_map("LA", "brier", 15.0)([record(6, 0.48), record(12, 0.49)])
    assert far.endswith("+0.0850 (paired SE 0.0050, 2 seeds: 17.0 SE, outside the seed spread)")
    with pytest.raises(LookupError):
        levels_worse_than_map("LA", "brier", 15.0)([record(6, 0.39)])


def table_3_record(cells: dict[tuple[str, str], float], seed: int = 6) -> dict:
    return with_health({"status": "ok", "seed": seed, "protocol": "paper", "scale": "cpu",
                        "cells": [{"row": r, "column": c, "value": v}
                                  for (r, c), v in cells.items()]})


def test_table_3_anchor_causes_quote_the_records_and_survive_missing_cells():
    from bench.reporting.causes.laplace_redux import (
        rows_where_fmnist_is_not_easiest,
        swag_against_map,
    )

    records = [table_3_record({("MAP", "conf_fmnist"): 65.0, ("MAP", "auroc_fmnist"): 98.0,
                               ("MAP", "conf_kmnist"): 60.0, ("MAP", "auroc_kmnist"): 99.0,
                               ("SWAG", "conf_fmnist"): 70.0, ("LA", "conf_fmnist"): 50.0})]
    cause = rows_where_fmnist_is_not_easiest(swag=False)(records)
    assert cause.startswith("measured in these records, where FMNIST is not the easiest: "
                            "MAP conf FMNIST 65.0 vs KMNIST 60.0; MAP auroc FMNIST 98.0 vs "
                            "KMNIST 99.0")
    assert "LA " not in cause
    swag = swag_against_map("conf")(records)
    assert "SWAG FMNIST conf 70.0 (paper SWAG FMNIST 84.0, EMNIST 64.9)" in swag
    assert "FMNIST conf is 65.0 against the paper's 64.2" in swag
    with pytest.raises(LookupError):
        swag_against_map("auroc")(records)


def test_the_side_runs_are_judged_against_their_row_and_quoted_in_its_cause():
    from bench.reporting.specs.laplace_redux import BBB_CAUSE, CSGHMC_CAUSE

    main = {("BBB", "conf_fmnist"): 75.0, ("BBB", "conf_kmnist"): 77.0,
            ("CSGHMC", "conf_fmnist"): 68.0, ("CSGHMC", "auroc_fmnist"): 97.0,
            ("CSGHMC", "conf_kmnist"): 70.0, ("CSGHMC", "auroc_kmnist"): 96.0}
    records = [table_3_record(main), table_3_record(main, seed=12),
               table_3_record({("BBB (KL summed)", "conf_fmnist"): 66.0,
                               ("BBB (KL summed)", "conf_kmnist"): 72.5}),
               table_3_record({("CSGHMC (code's step counter)", "conf_fmnist"): 100.0,
                               ("CSGHMC (code's step counter)", "auroc_fmnist"): 50.0,
                               ("CSGHMC (code's step counter)", "conf_kmnist"): 90.0,
                               ("CSGHMC (code's step counter)", "auroc_kmnist"): 99.0})]
    table = comparison_table(TABLE_3, records).set_index(["row", "column"])
    verdict, cause = table.loc[("BBB", "conf_fmnist"), ["verdict", "cause"]]
    assert verdict == "differs"
    assert cause.startswith("side run, seed 6 (sensitivity rows below): conf_fmnist 75 as run "
                            "(bayesian-torch 0.5's KL")
    assert "; with the KL summed over the weights 66. Mixed precision" in cause
    side = table.loc[("BBB (KL summed)", "conf_fmnist")]
    assert (side["paper"], side["verdict"]) == ("67.5", "agrees")
    assert side["cause"] == "" or side["verdict"] == "agrees"
    assert "with the code's step-size counter 100." in table.loc[("CSGHMC", "conf_fmnist"),
                                                                 "cause"]
    # Without its side run a row keeps the unmeasured cause; the paper's rows without
    # records still show their gap.
    alone = comparison_table(TABLE_3, records[:2]).set_index(["row", "column"])
    assert alone.loc[("BBB", "conf_fmnist"), "cause"] == BBB_CAUSE
    assert alone.loc[("CSGHMC", "conf_fmnist"), "cause"] == CSGHMC_CAUSE
    assert alone.loc[("MAP", "conf_fmnist"), "verdict"] == "missing"
    assert ("BBB (KL summed)", "conf_fmnist") not in alone.index
    # The side runs are not rows of the paper's anchors: FMNIST stays easiest for CSGHMC.
    assert fmnist_easiest(swag=False)(
        {(c["row"], c["column"]): c["value"] for r in records for c in r["cells"]
         if c["row"].startswith("CSGHMC")}) == 1.0


def test_table_3_renders_an_old_percent_and_a_new_fraction_record_to_one_table(tmp_path):
    old = table_3_record({("MAP", "conf_fmnist"): 66.0, ("MAP", "auroc_fmnist"): 98.0,
                          ("MAP", "nll_mnist"): 0.04}, seed=6)
    new = table_3_record({("MAP", "conf_fmnist"): 0.64, ("MAP", "auroc_fmnist"): 0.96,
                          ("MAP", "nll_mnist"): 0.06}, seed=12)
    new["fitted"] = {CELL_UNITS: NEUTRAL_CELLS}  # written by the task with neutral cells
    assert TABLE_3.record_view(old) is old
    written = render_report(TABLE_3, [old, new], tmp_path)
    frame = pd.read_csv(next(p for p in written if p.suffix == ".csv"))
    ours = {column: frame[(frame["row"] == "MAP") & (frame["column"] == column)].iloc[0]["ours"]
            for column in ("conf_fmnist", "auroc_fmnist", "nll_mnist")}
    assert ours["conf_fmnist"] == pytest.approx(65.0)  # both in %
    assert ours["auroc_fmnist"] == pytest.approx(97.0)
    assert ours["nll_mnist"] == pytest.approx(0.05)  # nats, never scaled
