"""The verdict rules of bench.reporting.verdicts, each on the case that once slipped through:
a count of 2.0000000000005 steps, a collapsed fit judged as if it had learnt, a ratio of a
total change of 0.0021 nats, a tolerance below the statistic's standard error, a rise read
from its end point, a side-run row counted among the paper's numbers."""

from __future__ import annotations

import dataclasses
import math

import pytest

from bench.metrics.fit_health import assess, constant_prediction_check
from bench.reporting.compare import anchor_table, comparison_table
from bench.reporting.findings import findings_markdown, group_line
from bench.reporting.scoreboard import count_texts
from bench.reporting.spec import Anchor
from bench.reporting.specs import SPECS
from bench.reporting.summary import rendered_summary
from bench.reporting.targets import PaperValue
from bench.reporting.verdicts import (
    AGREES,
    CLOSE,
    DIFFERS,
    INCONCLUSIVE,
    JUDGED,
    Count,
    Estimate,
    NotMeasurable,
    Sign,
    Tolerance,
    judge,
    ratio_above_floor,
)

TABLE_7 = SPECS["ssla/table-7"]
PAPER = PaperValue("table-7", "N(0,1)", "SSLA", "-0.0259")


def record(values: dict[tuple[str, str], float], seed: int = 0, protocol: str = "paper",
           health: dict | None = None) -> dict:
    return {"status": "ok", "seed": seed, "protocol": protocol, "scale": "cpu",
            "method": "ssla_assla", "timings": {"total_s": 1.0}, "git_sha": "f" * 40,
            "started_at": "2026-01-01T10:00:00+00:00",
            "finished_at": "2026-01-01T11:00:00+00:00", "health": health or {},
            "cells": [{"row": r, "column": c, "value": v} for (r, c), v in values.items()]}


def test_a_count_is_compared_as_an_integer():
    rule = Count(agree=1, close=2)
    assert rule.classify(2, None, (math.nan, math.nan)) == CLOSE
    assert rule.classify(1, None, (math.nan, math.nan)) == AGREES
    assert rule.classify(3, None, (math.nan, math.nan)) == DIFFERS
    with pytest.raises(ValueError, match="whole number"):
        rule.classify(2.0000000000005, None, (math.nan, math.nan))


def test_grid_steps_are_a_whole_number_even_where_the_log_ratio_is_not():
    from bench.reporting.figures.ggn_toys import GRID_METRICS
    from bench.reporting.specs.ggn_thesis import grid_steps_between_optima

    # Evidence optimum at delta = 10**0.4, test-LL optimum at 10**0.0 on a 0.2-decade grid:
    # log(10**0.4) / log(10**0.2) is 2 up to rounding; the count is the integer 2.
    deltas = [10 ** (0.2 * k) for k in range(-2, 4)]
    arrays = {"prior_precision": deltas, "log_evidence": [-(k - 2) ** 2 for k in range(-2, 4)],
              "test_ll": [-(k * k) for k in range(-2, 4)]}
    for name in GRID_METRICS:
        arrays.setdefault(name, [0.0] * len(deltas))
    steps = grid_steps_between_optima(10 ** 0.2)([{"arrays": arrays, "fitted": {}}])
    assert steps == 2 and isinstance(steps, int)
    with pytest.raises(ValueError, match="not a whole number of grid steps"):
        grid_steps_between_optima(10 ** 0.3)([{"arrays": arrays, "fitted": {}}])


def test_a_ratio_refuses_a_denominator_below_its_floor():
    assert ratio_above_floor(0.5, 2.0, 0.01, "total change") == 0.25
    with pytest.raises(NotMeasurable, match="total change 0.0021 below 0.01"):
        ratio_above_floor(0.001, 0.0021, 0.01, "total change")


def test_a_degenerate_ratio_anchor_is_not_measurable_never_agrees():
    def levelled(records):
        return ratio_above_floor(0.0, 0.0021, 0.01, "KFAC's total entropy change")

    spec = dataclasses.replace(TABLE_7, anchors=(Anchor("levels off", "small", levelled,
                                                        Tolerance(abs=0.1)),))
    line = anchor_table(spec, [record({})]).iloc[0]
    assert line["verdict"] == "not comparable"
    assert line["cause"] == "not measurable: KFAC's total entropy change 0.0021 below 0.01"


def test_a_tolerance_below_the_standard_error_defers_to_the_ci():
    rule = Tolerance(abs=0.0001, use_ci=False)
    # Paper inside our CI, the difference 2e-4 over the tolerance: with a standard error of
    # 5e-4 the CI decides, and a CI of +-2 standard errors cannot resolve a 1e-4 tolerance;
    # without a standard error the tolerance decides.
    assert rule.classify(-0.0261, PAPER, (-0.0271, -0.0251), 0.0005) == INCONCLUSIVE
    assert rule.classify(-0.0261, PAPER, (-0.0271, -0.0251)) == CLOSE
    # Within the stated tolerance the point agrees, however wide the CI.
    assert rule.classify(-0.0260, PAPER, (-0.0270, -0.0250), 0.0005) == AGREES
    # Outside the CI the difference is judged on the standard error, not the tolerance.
    assert rule.classify(-0.0270, PAPER, (-0.0280, -0.0260), 0.0005) == CLOSE
    assert rule.classify(-0.0261, PAPER, (-0.0263, -0.0259), 0.00005) == CLOSE
    # A tolerance above the standard error is kept: use_ci=False ignores the CI.
    wide = Tolerance(abs=0.00015, use_ci=False)
    assert wide.classify(-0.0261, PAPER, (-0.0271, -0.0251), 0.0001) == CLOSE
    assert judge(rule, PAPER, -0.0260, (-0.0270, -0.0250), "cause", 0.0005).verdict == AGREES


def test_a_ci_too_wide_to_decide_is_inconclusive_never_agrees():
    # Table 3's LA conf_fmnist on two seeds: 2-point tolerance, standard error 5.9, the
    # Student-t CI over two seeds [38.5, 82.9] holds the paper's 58.8 and almost everything else.
    paper = PaperValue("table-3", "LA", "conf_fmnist", "58.8")
    rule = Tolerance(abs=2.0, close=3.0)
    assert rule.classify(66.3, paper, (38.5, 82.9), 5.9) == INCONCLUSIVE
    assert rule.classify(66.3, paper, (38.5, 82.9)) == INCONCLUSIVE  # use_ci on its own too
    verdict = judge(rule, paper, 66.3, (38.5, 82.9), "a spec cause", 5.9)
    assert verdict.verdict == INCONCLUSIVE
    assert verdict.cause.startswith("our 95% CI [38.5, 82.9] holds the paper value")
    # Within the stated tolerance the point agrees; a CI inside the close band agrees.
    assert rule.classify(60.0, paper, (38.5, 82.9), 5.9) == AGREES
    assert rule.classify(61.5, paper, (57.0, 64.6), 1.5) == AGREES
    # A collapsed fit still overrides it: inconclusive is a judged verdict.
    assert INCONCLUSIVE in JUDGED
    # FINDINGS lists it with both numbers, as it lists a difference.
    cell = {"verdict": INCONCLUSIVE, "protocol": "paper", "row": "LA", "column": "conf_fmnist",
            "ours": 66.3, "paper": "58.8", "unit": "%", "link": "t.md", "cause": verdict.cause}
    assert "LA conf_fmnist 66.3 vs 58.8" in group_line([cell])
    # A report judged before the rule shows no count for it on the scoreboard.
    old = {"schema_version": 2, "causes_required": True}
    assert count_texts(old, {"agrees": 3})[INCONCLUSIVE] == "—"
    assert count_texts({"schema_version": 3}, {INCONCLUSIVE: 2})[INCONCLUSIVE] == "2"


def test_a_rise_is_judged_by_its_ci_not_its_end_point():
    rule = Sign(positive=True)
    assert rule.classify(0.004, None, (0.001, 0.007)) == AGREES
    assert rule.classify(0.004, None, (-0.002, 0.010)) == INCONCLUSIVE  # inside seed noise
    assert rule.classify(-0.004, None, (-0.007, -0.001)) == DIFFERS
    assert rule.classify(0.004, None, (math.nan, math.nan)) == CLOSE  # one seed
    spec = dataclasses.replace(TABLE_7, anchors=(
        Anchor("rise", "rises", lambda records: Estimate(0.004, -0.002, 0.010), rule),))
    line = anchor_table(spec, [record({})]).iloc[0]
    assert line["verdict"] == INCONCLUSIVE
    assert line["cause"] == ("our 95% CI of the change [-0.002, 0.01] holds zero: the seeds "
                             "cannot tell its sign")


def test_a_collapsed_fit_makes_its_cells_and_claims_not_comparable():
    collapsed = assess([constant_prediction_check(395.2, 395.25, 150)])
    values = {("N(0,1)", "SSLA"): -0.0259, ("N(0,0.1)", "SSLA"): -0.0300}
    records = [record(values, health={"N(0,1)": collapsed})]
    spec = dataclasses.replace(TABLE_7, anchors=(
        Anchor("uses N(0,1)", "1", lambda r: 1.0, Tolerance(abs=0.1), rows=("N(0,1)",)),
        Anchor("uses N(0,0.1)", "1", lambda r: 1.0, Tolerance(abs=0.1), rows=("N(0,0.1)",)),
        Anchor("other protocol", "1", lambda r: 1.0, Tolerance(abs=0.1),
               protocol="corrected")))
    table = comparison_table(spec, records).set_index(["row", "column"])
    assert table.loc[("N(0,1)", "SSLA"), "verdict"] == "not comparable"  # it would agree
    assert table.loc[("N(0,1)", "SSLA"), "cause"].startswith("fit failed (N(0,1), seed 0: "
                                                             "train NLL 395.2")
    assert table.loc[("N(0,0.1)", "SSLA"), "verdict"] == DIFFERS
    anchors = anchor_table(spec, records).set_index("label")["verdict"]
    assert anchors.to_dict() == {"uses N(0,1)": "not comparable", "uses N(0,0.1)": AGREES,
                                 "other protocol": AGREES}


def test_records_without_health_cannot_vouch_where_the_task_records_it():
    """SSLA Table 2's committed verdicts rested on records written before the regression
    runner recorded health: they passed for healthy. Where the spec says its task records
    health, such a record makes the cell and the claim not comparable."""
    healthy = assess([constant_prediction_check(100.0, 395.25, 150)])
    values = {("N(0,1)", "SSLA"): -0.0259, ("N(0,0.1)", "SSLA"): -0.0300}
    records = [record(values, health={"N(0,1)": healthy, "N(0,0.1)": healthy}),
               record(values, seed=1)]
    anchors = (Anchor("uses N(0,1)", "1", lambda r: 1.0, Tolerance(abs=0.1), rows=("N(0,1)",)),)
    lenient = dataclasses.replace(TABLE_7, anchors=anchors)
    strict = dataclasses.replace(lenient, records_health=True)
    assert comparison_table(lenient, records).set_index(["row", "column"]).loc[
        ("N(0,1)", "SSLA"), "verdict"] == AGREES
    table = comparison_table(strict, records).set_index(["row", "column"])
    assert table.loc[("N(0,1)", "SSLA"), "verdict"] == "not comparable"
    assert table.loc[("N(0,1)", "SSLA"), "cause"].startswith(
        "fit health not recorded (1 record(s), seed(s) 1, written before")
    assert anchor_table(strict, records).iloc[0]["verdict"] == "not comparable"
    assert comparison_table(strict, records[:1]).set_index(["row", "column"]).loc[
        ("N(0,1)", "SSLA"), "verdict"] == AGREES


def test_a_cell_not_comparable_for_two_reasons_names_both():
    """A failed fit does not hide the spec's own reason (e.g. a stand-in network)."""
    collapsed = assess([constant_prediction_check(395.2, 395.25, 150)])
    spec = dataclasses.replace(TABLE_7, not_comparable={
        ("N(0,1)", "SSLA"): lambda records: "measured on a stand-in"})
    records = [record({("N(0,1)", "SSLA"): -0.0259}, health={"N(0,1)": collapsed})]
    cause = comparison_table(spec, records).set_index(["row", "column"]).loc[
        ("N(0,1)", "SSLA"), "cause"]
    assert cause.startswith("fit failed (N(0,1), seed 0: train NLL 395.2")
    assert cause.endswith("; measured on a stand-in")


def test_side_run_rows_are_counted_and_listed_apart_from_the_papers():
    spec = dataclasses.replace(TABLE_7, paper_rows={"N(0,1)": "N(0,1)",
                                                    "N(0,1) (side run)": "N(0,1)"})
    records = [record({("N(0,1)", "SSLA"): -0.0259, ("N(0,1) (side run)", "SSLA"): -0.05})]
    table = comparison_table(spec, records)
    summary = rendered_summary(spec, table, anchor_table(spec, records), records)
    assert summary["counts"]["paper"]["agrees"] == 1
    assert summary["counts"]["paper"]["differs"] == 0
    assert summary["study_counts"]["paper"]["differs"] == 1
    flags = {(c["row"], c["verdict"]): c["study"] for c in summary["unconfirmed_cells"]}
    assert flags[("N(0,1) (side run)", DIFFERS)] is True
    assert not any(study for (row, _), study in flags.items() if row == "N(0,1)")
    page = findings_markdown({"ssla/table-7": {**summary, "paper": "ssla",
                                                "artifact": "table-7"}},
                             [("ssla", "table-7")])
    main, studies = page.split("## Sensitivity studies and the corrected protocol")
    assert "N(0,1) (side run)" not in main and "N(0,1) (side run)" in studies
    assert "What differs: 0 number(s)" in main


def test_a_rerun_replaces_its_predecessor_in_claims_and_health_as_in_the_cells():
    """Figure 5.4's reruns (new config, same seed) left the first records beside them: the
    cells took the latest, but the claims and the fit health read both."""
    collapsed = assess([constant_prediction_check(395.2, 395.25, 150)])
    healthy = assess([constant_prediction_check(100.0, 395.25, 150)])
    first = record({("N(0,1)", "SSLA"): 5.0}, health={"N(0,1)": collapsed})
    rerun = {**record({("N(0,1)", "SSLA"): -0.0259}, health={"N(0,1)": healthy}),
             "finished_at": "2026-01-02T11:00:00+00:00"}
    seen = []
    spec = dataclasses.replace(TABLE_7, anchors=(
        Anchor("uses N(0,1)", "1", lambda r: seen.append(len(r)) or 1.0, Tolerance(abs=0.1),
               rows=("N(0,1)",)),))
    table = comparison_table(spec, [first, rerun]).set_index(["row", "column"])
    assert table.loc[("N(0,1)", "SSLA"), "verdict"] == AGREES
    assert table.loc[("N(0,1)", "SSLA"), "n_superseded"] == 1
    assert anchor_table(spec, [first, rerun]).iloc[0]["verdict"] == AGREES
    assert seen == [1]
