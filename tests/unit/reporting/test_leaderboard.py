"""The leaderboard: rows ranked on a spec's metrics with seed CIs and ties, only healthy fits,
the corrected protocol where there is one, and a mean rank across artifacts."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from scipy import stats

from bench.cli.report_command import main as report_main
from bench.reporting.leaderboard import (
    NO_HEALTH,
    LeaderboardError,
    artifact_board,
    leaderboard_markdown,
)
from bench.reporting.ranking import RankedMetric, mean_ranks, ranked
from bench.reporting.spec import ArtifactSpec
from bench.reporting.specs import SPECS

GOLDEN_SMOKE = Path(__file__).resolve().parents[2] / "golden" / "smoke"


def test_rows_are_ranked_by_mean_with_student_t_intervals_and_ties():
    values = {"A": {0: 1.0, 1: 1.2, 2: 1.1}, "B": {0: 2.0, 1: 2.1, 2: 2.2},
              "C": {0: 1.02, 1: 1.22, 2: 1.15}}
    standings = ranked(values, RankedMetric("nll"))
    assert [s.row for s in standings] == ["A", "C", "B"]
    assert [s.rank for s in standings] == [1, 2, 3]
    a = standings[0]
    half = stats.t.ppf(0.975, 2) * 0.1 / math.sqrt(3)
    assert a.mean == pytest.approx(1.1)
    assert (a.ci_low, a.ci_high) == pytest.approx((1.1 - half, 1.1 + half))
    assert a.tied_with == ("C",) and standings[2].tied_with == ()


def test_higher_is_better_and_a_distance_to_nominal_rank_the_other_way():
    values = {"low": {0: 0.6, 1: 0.62}, "high": {0: 0.9, 1: 0.91}}
    assert [s.row for s in ranked(values, RankedMetric("auroc", "higher"))] == ["high", "low"]
    coverage = {"over": {0: 99.0, 1: 99.0}, "under": {0: 90.0, 1: 90.0}}
    standings = ranked(coverage, RankedMetric("cov95", nominal=95.0))
    assert [(s.row, s.mean) for s in standings] == [("over", 4.0), ("under", 5.0)]


def test_equal_means_share_a_rank_and_one_seed_has_no_interval():
    standings = ranked({"a": {0: 1.0}, "b": {0: 1.0}, "c": {0: 2.0}}, RankedMetric("nll"))
    assert [s.rank for s in standings] == [1, 1, 3]
    assert math.isnan(standings[0].ci_low) and standings[0].tied_with == ()


def test_mean_rank_is_normalised_per_artifact():
    table = mean_ranks([("t1", "M", 1, 3), ("t2", "M", 2, 2), ("t1", "N", 3, 3)])
    assert table == [("M", 1.5, 0.5, 2), ("N", 3.0, 1.0, 1)]


def _record(protocol, seed, cells, health=None, status="ok"):
    record = {"protocol": protocol, "seed": seed, "status": status,
              "finished_at": f"2026-12-07T00:00:0{seed}",
              "cells": [{"row": row, "column": column, "value": value}
                        for row, column, value in cells]}
    if health is not None:
        record["health"] = {row: {"healthy": ok, "why": "" if ok else "chance accuracy"}
                            for row, ok in health.items()}
    return record


SPEC = ArtifactSpec(paper="demo", artifact="table-1", title="demo",
                    leaderboard=(RankedMetric("nll"), RankedMetric("cov95", nominal=95.0)))


def _cells(row, nll, cov):
    return [(row, "nll", nll), (row, "cov95", cov)]


def test_the_board_ranks_the_corrected_protocol_and_only_healthy_fits():
    records = [
        *[_record("corrected", s, _cells("good", 1.0 + s / 10, 94.0), {"good": True})
          for s in range(3)],
        *[_record("corrected", s, _cells("fine", 2.0 + s / 10, 95.0), {"fine": True})
          for s in range(3)],
        *[_record("corrected", s, _cells("flaky", 0.5, 95.0), {"flaky": s != 1})
          for s in range(3)],
        *[_record("corrected", s, _cells("old", 0.4, 95.0)) for s in range(3)],
        *[_record("paper", s, _cells("paper-only", 0.1, 95.0), {"paper-only": True})
          for s in range(3)],
    ]
    board = artifact_board(SPEC, records)
    assert board.protocol == "corrected"
    assert [s.row for s in board.standings] == ["good", "fine"]
    assert board.not_ranked["flaky"].startswith("fit failed (seed 1: chance accuracy")
    assert board.not_ranked["old"] == NO_HEALTH
    assert board.not_ranked["paper-only"].startswith("no records under the protocol ranked")
    mean, low, high = board.others["|cov95 - 95| (lower is better)"]["good"]
    assert mean == pytest.approx(1.0) and low == pytest.approx(1.0)
    page = leaderboard_markdown([board], "cpu")
    assert "| good | 0.00 | 1.00 | 1 |" in page and "| fine | 1.00 | 2.00 | 1 |" in page
    assert "\\|cov95 - 95\\|" in page


def test_a_protocol_without_ok_records_is_not_the_one_ranked():
    records = [_record("corrected", 0, _cells("a", 1.0, 95.0), {"a": True}, status="failed"),
               *[_record("paper", s, _cells("a", 1.0 + s, 95.0), {"a": True})
                 for s in range(2)]]
    board = artifact_board(SPEC, records)
    assert board.protocol == "paper" and [s.row for s in board.standings] == ["a"]


def test_a_rerun_supersedes_and_a_failed_job_on_one_seed_unranks_the_row():
    rerun = _record("paper", 1, _cells("a", 1.5, 95.0), {"a": True})
    rerun["finished_at"] = "2026-12-08T00:00:00"
    records = [*[_record("paper", s, _cells("a", 1.0, 95.0), {"a": s != 1}) for s in range(2)],
               rerun,
               *[_record("paper", s, _cells("b", 2.0, 95.0), {"b": True}) for s in range(2)],
               _record("paper", 2, [], status="failed"),
               _record("paper", 2, _cells("a", 1.0, 95.0), {"a": True})]
    board = artifact_board(SPEC, records)
    assert [s.row for s in board.standings] == ["a"]
    assert board.standings[0].mean == pytest.approx((1.0 + 1.5 + 1.0) / 3)
    assert board.not_ranked["b"].startswith("no ok nll on seed(s) 2 of this protocol")


def test_one_seed_leaves_the_tie_undetermined_and_a_lone_row_out_of_the_mean_rank():
    records = [_record("paper", 0, [*_cells("a", 1.0, 95.0), *_cells("b", 2.0, 95.0)],
                       {"a": True, "b": True})]
    board = artifact_board(SPEC, records)
    page = leaderboard_markdown([board], "cpu")
    assert "| 1 | a | 1 (1 seed) | undetermined (no interval) |" in page
    lone = artifact_board(SPEC, [_record("paper", 0, _cells("a", 1.0, 95.0), {"a": True})])
    assert "| a | " not in leaderboard_markdown([lone], "cpu").split("## demo/table-1")[0]


def test_a_metric_the_records_do_not_have_is_one_line():
    spec = ArtifactSpec(paper="demo", artifact="table-1", title="demo",
                        leaderboard=(RankedMetric("ece"),))
    with pytest.raises(LeaderboardError, match="'ece' is not a column of its records"):
        artifact_board(spec, [_record("paper", 0, _cells("a", 1.0, 95.0), {"a": True})])


@pytest.mark.parametrize("spec", [s for s in SPECS.values() if s.leaderboard],
                         ids=lambda spec: spec.key)
def test_every_leaderboard_metric_is_a_column_the_experiment_records(spec):
    golden = GOLDEN_SMOKE / f"{spec.experiment.replace('/', '__')}.json"
    entries = json.loads(golden.read_text())
    columns = {cell[1] for key, entry in entries.items() if not key.startswith("_")
               for cell in entry.get("cells") or ()}
    assert {metric.column for metric in spec.leaderboard} <= columns


def test_the_command_writes_the_page(tmp_path, capsys):
    status = report_main(["--leaderboard", "--scale", "cpu", "--results-dir",
                          str(tmp_path / "results"), "--out", str(tmp_path / "reports")])
    assert status == 0
    page = (tmp_path / "reports" / "leaderboard.md").read_text()
    assert page.startswith("# Leaderboard (cpu scale)")
    assert "## ssla/table-2" in page and "No records at this scale." in page
    assert (tmp_path / "reports" / "leaderboard.png").stat().st_size > 0


def test_the_reports_index_links_the_leaderboard_once_there_is_one(tmp_path):
    from bench.reporting.index import index_markdown

    assert "leaderboard.md" not in index_markdown(tmp_path)
    (tmp_path / "leaderboard.md").write_text("# Leaderboard (cpu scale)\n")
    assert "[leaderboard.md](leaderboard.md)" in index_markdown(tmp_path)


def test_a_row_the_spec_declares_a_stand_in_is_not_ranked_under_the_papers_name():
    spec = dataclasses.replace(SPEC, not_comparable={("*", "FULL", "*"): "last-layer stand-in"},
                               timed=(("*", "*", "nll"),))
    records = [*[_record("paper", s, _cells("FULL", 0.5, 95.0), {"FULL": True})
                 for s in range(2)],
               *[_record("paper", s, _cells("DIAG", 1.0 + s, 95.0), {"DIAG": True})
                 for s in range(2)]]
    board = artifact_board(spec, records)
    assert [s.row for s in board.standings] == ["DIAG"]  # seconds-only reasons do not count
    assert board.not_ranked["FULL"] == "last-layer stand-in"
