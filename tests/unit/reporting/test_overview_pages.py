"""Summaries (rendered and backfilled), the scoreboard, FINDINGS.md and timing.md."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess

import pandas as pd
import pytest

from bench.reporting.backfill import backfill_summaries, backfilled_summary, split_row
from bench.reporting.files import summary_path
from bench.reporting.findings import findings_markdown
from bench.reporting.render import render_report
from bench.reporting.scoreboard import scoreboard_rows
from bench.reporting.spec import Anchor
from bench.reporting.specs import SPECS
from bench.reporting.summary import read_summaries
from bench.reporting.timing_page import duration_text, timing_markdown
from bench.reporting.verdicts import Tolerance

TABLE_7 = SPECS["ssla/table-7"]
CAUSE = "the prior is too narrow for this offset"
CLAIM_CAUSE = "ASSLA uses the mean GGN"
SPEC = dataclasses.replace(
    TABLE_7, causes={("N(0,0.1)", "*"): CAUSE, ("SSLA beats ASSLA", "*"): CLAIM_CAUSE},
    anchors=(Anchor("SSLA beats ASSLA", "0", lambda records: 0.5, Tolerance(abs=0.1)),
             Anchor("ASSLA is finite", "1", lambda records: 1.0, Tolerance(abs=0.1))))
COMMITTED_CSV = """artifact,row,column,paper,ours,ci_low,ci_high,n_seeds,scale,protocol,verdict,\
ours_paper_seed,paper_stderr,n_failed,seeds,cause,unit,n_superseded
table-7,"N(0,1)",SSLA,-0.0259,-0.0259,,,1,cpu,paper,agrees,,,0,0,,nats,0
table-7,"N(0,1)",ASSLA,-0.0259,-0.0262,,,1,cpu,paper,differs,,,0,0,why not,nats,0
table-7,"N(0,10)",SSLA,-0.0259,,,,0,cpu,paper,missing,,,0,,no ok record,nats,0
table-7,"N(0,1)",SSLA,-0.0259,-0.0300,,,1,cpu,corrected,close,-0.0301,,0,0,,nats,0
table-7,"N(0,1)",extra,,1.5,,,1,cpu,corrected,no paper value,,,0,0,,,0
"""
COMMITTED_MD = """# ssla table-7 — old layout

Scale: cpu · Protocols: paper, corrected · Seeds: 0 (no paper seed) · Records: 3 (2 ok, 1 \
failed) · Git: 0123456789ab, ba9876543210 (uncommitted changes) · torch: 2.14.1

## Protocol: paper

| row | column | verdict |
|:----|:-------|:--------|
| N(0,1) | SSLA | agrees |

## Anchors

| label | paper | ours | verdict | cause |
|:------|:------|:-----|:--------|:------|
| a \\| b claim | > 0 | 0.25 | close | few seeds |
| second claim | 1 | — | missing | LookupError: no cells |

## Notes

- old notes
"""


def git(folder, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=folder, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def committed(tmp_path):
    """A reports folder in a git repository holding one report rendered before summaries."""
    out = tmp_path / "reports"
    (out / "ssla").mkdir(parents=True)
    (out / "ssla" / "table-7.csv").write_text(COMMITTED_CSV)
    (out / "ssla" / "table-7.md").write_text(COMMITTED_MD)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "old report")
    return out


def test_split_row_keeps_escaped_bars():
    assert split_row("| a \\| b | c |") == ["a | b", "c"]


def test_backfilled_summary_counts_the_committed_csv(committed):
    summary = backfilled_summary(TABLE_7, committed)
    assert summary["source"] == "backfilled"
    assert summary["backfilled_from"]["report_git_sha"] == git(committed, "rev-parse", "HEAD")
    assert summary["backfilled_from"]["uncommitted_changes"] is False
    assert summary["protocols"] == ["paper", "corrected"]
    assert summary["counts"]["paper"] == {"agrees": 1, "close": 0, "differs": 1,
                                          "inconclusive": 0, "not comparable": 0,
                                          "no paper value": 0, "missing": 1, "failed": 0,
                                          "needs data": 0}
    assert summary["counts"]["corrected"]["close"] == 1
    assert summary["counts"]["corrected"]["no paper value"] == 1
    assert [a["label"] for a in summary["anchors"]] == ["a | b claim", "second claim"]
    assert summary["anchors"][0]["ours"] == 0.25 and summary["anchors"][1]["ours"] is None
    assert summary["anchor_counts"]["close"] == 1 and summary["anchor_counts"]["missing"] == 1
    assert summary["anchors"][0]["link"] == "ssla/table-7.md#anchors"
    assert summary["records"]["git_shas"] == ["0123456789ab", "ba9876543210"]
    assert summary["records"]["uncommitted_changes"] is True
    assert summary["timings"] is None and "not kept" in summary["gaps"]["timings"]
    cells = {(c["protocol"], c["row"], c["column"]): c for c in summary["unconfirmed_cells"]}
    assert set(cells) == {("paper", "N(0,1)", "ASSLA"), ("paper", "N(0,10)", "SSLA"),
                          ("corrected", "N(0,1)", "SSLA")}
    assert cells[("corrected", "N(0,1)", "SSLA")]["ours"] == -0.0301  # the judged seed value
    assert cells[("paper", "N(0,1)", "ASSLA")]["link"] == "ssla/table-7.md#protocol-paper"
    written = backfill_summaries({"ssla/table-7": TABLE_7}, committed)
    assert written == [summary_path("ssla", "table-7", committed)]
    assert backfill_summaries({"ssla/table-7": TABLE_7}, committed) == []  # once only
    stored = json.loads(written[0].read_text())
    assert stored["report_csv_sha256"] == hashlib.sha256(COMMITTED_CSV.encode()).hexdigest()
    csv = committed / "ssla" / "table-7.csv"
    csv.write_text(COMMITTED_CSV.replace("why not", "re-rendered without a summary"))
    assert backfill_summaries({"ssla/table-7": TABLE_7}, committed) == written  # stale: redone
    assert json.loads(written[0].read_text())["backfilled_from"]["uncommitted_changes"] is True


def test_scoreboard_rows_from_a_backfilled_summary(committed):
    backfill_summaries({"ssla/table-7": TABLE_7}, committed)
    rows = scoreboard_rows(read_summaries(committed), [("ssla", "table-7"), ("ssla", "blr")])
    paper, corrected, missing = (rows.iloc[i] for i in range(3))
    assert paper["artifact"] == "[table-7](ssla/table-7.md)" and corrected["artifact"] == "↳"
    assert (paper["agrees"], paper["differs"], paper["missing"]) == ("1", "1", "1")
    assert (corrected["close"], corrected["no paper value"]) == ("1", "1")
    assert paper["scale"] == "cpu" and paper["records"] == "3 (2 ok, 1 failed)"
    assert (paper["summary"], corrected["summary"]) == ("backfilled", "")
    assert paper["record dates"].startswith("— (before ") and "the report's commit" in \
        paper["record dates"]
    assert paper["claims"] == "0 of 2 agree; 1 close; 1 missing"
    assert missing["scale"] == "— (no report yet)"


def records() -> list[dict]:
    def record(seed, protocol, method, seconds, values):
        return {"status": "ok", "seed": seed, "protocol": protocol, "scale": "cpu",
                "method": method, "timings": {"total_s": seconds}, "git_sha": "f" * 40,
                "started_at": f"2026-01-0{seed + 1}T10:00:00+00:00",
                "finished_at": f"2026-01-0{seed + 1}T11:00:00+00:00",
                "cells": [{"row": r, "column": c, "value": v} for (r, c), v in values.items()]}

    good = {("N(0,0.01)", "SSLA"): -0.0259, ("N(0,0.1)", "SSLA"): -0.0300,
            ("N(0,0.1)", "ASSLA"): -0.0260}
    return [record(0, "paper", "ssla", 30.0, good), record(1, "paper", "ssla", 50.0, good),
            record(1, "paper", "assla", 20.0, {("N(0,1)", "ASSLA"): -0.0259})]


def test_rendered_summary_matches_the_csv_and_the_records(tmp_path):
    render_report(SPEC, records(), tmp_path)
    summary = json.loads(summary_path("ssla", "table-7", tmp_path).read_text())
    csv = pd.read_csv(tmp_path / "ssla" / "table-7.csv", keep_default_na=False)
    assert summary["counts"]["paper"] == {v: int((csv["verdict"] == v).sum())
                                          for v in summary["counts"]["paper"]}
    assert summary["records"]["first_started"] == "2026-01-01T10:00:00+00:00"
    assert summary["records"]["last_finished"] == "2026-01-02T11:00:00+00:00"
    assert summary["timings"]["job_seconds"] == 100.0
    assert summary["timings"]["methods"] == [{"method": "ssla", "jobs": 2, "job_seconds": 80.0},
                                             {"method": "assla", "jobs": 1,
                                              "job_seconds": 20.0}]


def test_findings_list_each_unconfirmed_number_and_claim_with_cause(tmp_path):
    render_report(SPEC, records(), tmp_path)
    text = findings_markdown(read_summaries(tmp_path), [("ssla", "table-7")])
    lines = text.splitlines()
    claim = next(line for line in lines if "claim: SSLA beats ASSLA" in line)
    assert claim.startswith("- **differs**") and 'ours 0.5 vs paper "0"' in claim
    assert f"Cause: {CLAIM_CAUSE}" in claim and "(ssla/table-7.md#anchors)" in claim
    assert not any("ASSLA is finite" in line for line in lines)  # it agrees
    differs = next(line for line in lines if "N(0,0.1) SSLA" in line)
    assert differs.startswith("- **differs** · protocol paper")
    assert "ours -0.03 nats vs paper -0.0259 nats" in differs and f"Cause: {CAUSE}" in differs
    assert "(ssla/table-7.md#all-cells-protocol-paper)" in differs
    close = next(line for line in lines if "N(0,0.1) ASSLA" in line)
    assert close.startswith("- **close**")
    missing = [line for line in lines if line.startswith("- **missing**")]
    assert len(missing) == 1 and "6 paper number(s)" in missing[0]  # one line per cause
    assert "N(0,10^6) SSLA" in missing[0] and "N(0,1) ASSLA" not in missing[0]
    assert "1 claim(s) and 8 printed number(s) of the papers' rows listed" in text


def test_timing_page_sums_jobs_and_states_the_gaps(tmp_path, committed):
    render_report(SPEC, records(), tmp_path)
    summaries = read_summaries(tmp_path)
    summaries["ssla/table-8"] = {**backfilled_summary(TABLE_7, committed),
                                 "artifact": "table-8", "experiment": "ssla/table-8"}
    text = timing_markdown(summaries, ["ssla/table-7", "ssla/table-8", "ssla/blr"])
    assert "| ssla/table-7 | ssla/table-7 | cpu     | 3      | 1 min 40 s" in text
    assert "| ssla/table-7 | cpu     | ssla     | 2      | 1 min 20 s | 80%" in text
    assert "1 of 3 experiments with cpu-scale records here: **1 min 40 s**" in text
    assert "- records not kept here (results/ is not committed) and the report predates " \
        "summaries: ssla/table-8" in text
    assert "- no report: ssla/blr" in text
    assert duration_text(12.34) == "12.3 s" and duration_text(3 * 3600 + 36 * 60) == "3 h 36 min"


def sidecar(key: str, experiment: str, cells: list[dict], anchors: list[dict]) -> dict:
    paper, artifact = key.split("/")
    return {"paper": paper, "artifact": artifact, "experiment": experiment, "scale": "cpu",
            "source": "rendered", "counts": {"paper": {}}, "anchors": anchors,
            "unconfirmed_cells": cells}


def test_findings_list_shared_records_once_and_group_claims_waiting_for_data():
    cell = {"protocol": "paper", "row": "LA/KFAC", "column": "cov95", "paper": "100.0",
            "ours": 80.0, "verdict": "differs", "cause": "fixed unit noise", "unit": "%",
            "link": "ssla/table-2.md#all-cells-protocol-paper"}
    data = ("image data set 'cifar10' (test split) not found: put test_batch in "
            "$BENCH_DATA_DIR/cifar10/")
    waiting = [{"label": f"claim {i}", "paper": "1", "ours": None, "verdict": "needs data",
                "cause": data, "link": "ssla/figure-2.md#anchors"} for i in (1, 2)]
    summaries = {"ssla/table-2": sidecar("ssla/table-2", "ssla/table-2", [cell], []),
                 "ssla/figure-2": sidecar("ssla/figure-2", "ssla/table-2", [cell], waiting)}
    text = findings_markdown(summaries, [("ssla", "figure-2"), ("ssla", "table-2")])
    lines = text.splitlines()
    assert sum("LA/KFAC cov95: ours 80 % vs paper 100.0 %" in line for line in lines) == 1
    assert ("- 1 paper number(s) of the same records are listed under "
            "[ssla table-2 (cpu scale)](#ssla-table-2-cpu-scale).") in lines
    grouped = [line for line in lines if line.startswith("- **needs data**")]
    assert len(grouped) == 1 and "2 claim(s): claim 1; claim 2" in grouped[0]
    assert grouped[0].endswith("Cause: image data set 'cifar10' (test split) not found")
    assert "2 claim(s) and 1 printed number(s) of the papers' rows listed" in text


def test_a_damaged_summary_stops_the_index_with_one_line_naming_it(tmp_path, capsys):
    from bench.cli.report_command import main as report_main

    damaged = tmp_path / "ssla" / "table-7.summary.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"schema_version": 3, "paper": "ssla", "artif')
    assert report_main(["--index", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith(f"error: {damaged}: damaged summary (JSONDecodeError: ")
