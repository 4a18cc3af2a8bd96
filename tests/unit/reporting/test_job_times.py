"""Job times in a report's summary: superseded records left out, the wall time while jobs
ran, CPU time and the load the jobs saw; and how the timing page shows them."""

from __future__ import annotations

import pytest

from bench.reporting.summary import (
    busy_seconds,
    busy_spans,
    job_times,
    on_shared_cores,
    short_gap_seconds,
    superseded_records,
)
from bench.reporting.timing_page import reproduce_all_lines, timing_markdown


def record(seed, finished, cells, total=10.0, started=None, method="MAP", **extra):
    return {"status": "ok", "seed": seed, "protocol": "paper", "method": method,
            "cells": [{"row": row, "column": column, "value": 1.0} for row, column in cells],
            "started_at": started or finished, "finished_at": finished,
            "timings": {"total_s": total}, **extra}


def test_a_rerun_of_every_cell_supersedes_the_earlier_record_of_that_seed():
    old = record(6, "2026-01-01T10:00:00", [("MAP", "conf"), ("MAP", "auroc")], total=2200.0)
    new = record(6, "2026-01-01T12:00:00", [("MAP", "conf"), ("MAP", "auroc")], total=340.0)
    other_seed = record(12, "2026-01-01T09:00:00", [("MAP", "conf")])
    partly = record(6, "2026-01-01T09:00:00", [("MAP", "conf"), ("MAP", "nll")])
    assert superseded_records([new, old, other_seed, partly]) == [old]
    times = job_times([new, old, other_seed, partly])
    assert times["jobs"] == 3 and times["superseded_jobs"] == 1
    assert times["job_seconds"] == pytest.approx(340.0 + 10.0 + 10.0)


def test_busy_seconds_is_the_union_of_the_job_spans():
    spans = [("2026-01-01T10:00:00+00:00", "2026-01-01T10:10:00+00:00"),
             ("2026-01-01T10:05:00+00:00", "2026-01-01T10:20:00+00:00"),
             ("2026-01-01T12:00:00+00:00", "2026-01-01T12:01:00+00:00"),
             ("2026-01-01T10:06:00+00:00", "2026-01-01T10:07:00+00:00")]
    records = [{"started_at": a, "finished_at": b} for a, b in spans]
    assert busy_seconds(records) == pytest.approx(20 * 60 + 60)
    assert busy_seconds([{"started_at": None}]) is None


@pytest.mark.parametrize(("loads", "expected"), [
    ({"at_start": {"cores": 2, "load_1m": 2.1}, "at_end": {"cores": 2, "load_1m": 1.9}}, False),
    ({"at_start": {"cores": 2, "load_1m": 1.0}, "at_end": {"cores": 2, "load_1m": 4.3}}, True),
    (None, None)])
def test_shared_cores_means_a_load_above_the_cores(loads, expected):
    assert on_shared_cores({"machine_load": loads} if loads else {}) is expected


def summary(experiment, timings):
    return {"experiment": experiment, "scale": "cpu", "timings": timings,
            "records": {"first_started": "2026-01-01T10:00", "last_finished": "2026-01-01T11:00"}}


def test_the_timing_page_sums_the_wall_time_while_jobs_ran_and_names_shared_cores():
    quiet = record(0, "2026-01-01T10:30:00+00:00", [("r", "c")], total=1800.0,
                   started="2026-01-01T10:00:00+00:00",
                   machine_load={"at_end": {"cores": 2, "load_1m": 2.0}})
    quiet["timings"]["cpu_s"] = 1790.0
    busy = record(0, "2026-01-01T11:00:00+00:00", [("r", "c")], total=3600.0,
                  started="2026-01-01T10:00:00+00:00",
                  machine_load={"at_end": {"cores": 2, "load_1m": 5.0}})
    summaries = {"a/x": summary("a/x", job_times([quiet])),
                 "a/y": summary("a/y", job_times([busy])),
                 "a/z": summary("a/z", {"jobs": 1, "jobs_untimed": 0, "job_seconds": 60.0,
                                        "methods": []})}
    text = "\n".join(reproduce_all_lines(summaries_found(summaries), ["a/x", "a/y", "a/z"]))
    # a/x ran inside a/y's span (one worker queue): the overlap counts once, a/z adds its job time
    assert "Wall time while their jobs ran: **1 h 01 min**" in text
    assert "other work shared the cores, so longer than on quiet cores: a/y." in text
    assert "count their job time instead: a/z" in text
    page = timing_markdown(summaries, ["a/x", "a/y", "a/z"])
    assert "| 30 min 00 s " in page and "| quiet " in page and "shared for 1 of 1 jobs" in page
    assert "29 min 50 s" in page and "not recorded" in page


def summaries_found(summaries):
    from bench.reporting.timing_page import experiments

    return experiments(summaries)


def test_a_quiet_experiment_with_some_older_records_is_not_called_shared():
    quiet = record(0, "2026-01-01T10:30:00+00:00", [("r", "c")],
                   started="2026-01-01T10:00:00+00:00",
                   machine_load={"at_end": {"cores": 2, "load_1m": 2.0}})
    older = record(1, "2026-01-01T10:30:00+00:00", [("r", "c")],
                   started="2026-01-01T10:00:00+00:00")
    summaries = {"a/x": summary("a/x", job_times([quiet, older]))}
    text = "\n".join(reproduce_all_lines(summaries_found(summaries), ["a/x"]))
    assert "shared the cores" not in text
    assert "(1 experiments) cannot say whether the cores were shared" in text


def test_experiments_run_at_different_times_add_up_and_older_summaries_add_their_wall_time():
    morning = record(0, "2026-01-01T10:30:00+00:00", [("r", "c")], total=1800.0,
                     started="2026-01-01T10:00:00+00:00")
    evening = record(0, "2026-01-01T20:20:00+00:00", [("r", "c")], total=1200.0,
                     started="2026-01-01T20:00:00+00:00")
    older = {**job_times([morning]), "busy_spans": None}
    summaries = {"a/x": summary("a/x", job_times([morning])),
                 "a/y": summary("a/y", job_times([evening])),
                 "a/z": summary("a/z", older)}
    text = "\n".join(reproduce_all_lines(summaries_found(summaries), ["a/x", "a/y", "a/z"]))
    assert "Wall time while their jobs ran: **1 h 20 min**" in text


def test_busy_spans_join_overlapping_jobs():
    records = [record(0, "2026-01-01T10:30:00+00:00", [("r", "c")],
                      started="2026-01-01T10:00:00+00:00"),
               record(0, "2026-01-01T10:40:00+00:00", [("r", "c")],
                      started="2026-01-01T10:20:00+00:00"),
               record(0, "2026-01-01T12:00:00+00:00", [("r", "c")],
                      started="2026-01-01T11:00:00+00:00")]
    assert busy_spans(records) == [["2026-01-01T10:00:00+00:00", "2026-01-01T10:40:00+00:00"],
                                   ["2026-01-01T11:00:00+00:00", "2026-01-01T12:00:00+00:00"]]


def test_the_seconds_between_back_to_back_jobs_are_added_to_the_whole_run():
    first = record(0, "2026-01-01T10:30:00+00:00", [("r", "c")],
                   started="2026-01-01T10:00:00+00:00")
    # 40 s later the next multirun's job starts (its process start-up), and 40 s after that
    # the next: both gaps belong to the run; the evening part is another run (gap of hours).
    second = record(1, "2026-01-01T10:40:40+00:00", [("r", "c")],
                    started="2026-01-01T10:30:40+00:00")
    third = record(2, "2026-01-01T10:51:20+00:00", [("r", "c")],
                   started="2026-01-01T10:41:20+00:00")
    evening = record(3, "2026-01-01T20:10:00+00:00", [("r", "c")],
                     started="2026-01-01T20:00:00+00:00")
    summaries = {"a/x": summary("a/x", job_times([first, second])),
                 "a/y": summary("a/y", job_times([third, evening]))}
    assert short_gap_seconds([*summaries["a/x"]["timings"]["busy_spans"],
                              *summaries["a/y"]["timings"]["busy_spans"]]) == 80.0
    text = "\n".join(reproduce_all_lines(summaries_found(summaries), ["a/x", "a/y"]))
    assert "Wall time while their jobs ran: **1 h 00 min**" in text
    assert "not in that union: 1 min 20 s here" in text
    assert "about **1 h 01 min** with them" in text
