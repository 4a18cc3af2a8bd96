"""Every committed report judged under the current verdict rules (summary schema
``VERDICT_RULES_SINCE`` or later) holds, cell by cell, the verdict those rules give its own
numbers: a rule that changes without its reports being re-rendered fails here (the
inconclusive rule of 12-07 moved 7 committed cells, which were re-rendered)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from bench.reporting.specs import SPECS
from bench.reporting.summary import under_verdict_rules
from bench.reporting.targets import PaperValue
from bench.reporting.verdicts import JUDGED, judge

REPORTS = Path(__file__).resolve().parents[3] / "reports"


def judged_reports() -> list[tuple[str, Path]]:
    """(spec key, CSV) of every committed comparison table under the current rules."""
    found = []
    for csv in sorted(REPORTS.glob("*/*.csv")):
        key = f"{csv.parent.name}/{csv.stem}"
        summary = csv.with_suffix(".summary.json")
        if key not in SPECS or not summary.exists():
            continue
        columns = set(csv.open().readline().strip().split(","))
        if (under_verdict_rules(json.loads(summary.read_text()))
                and {"verdict", "stderr"} <= columns):
            found.append((key, csv))
    return found


def number(text: str) -> float:
    return float(text) if text not in ("", "nan") else math.nan


def rejudged(key: str, line: pd.Series) -> str:
    """The verdict the spec's rule gives the line's own numbers (the paper seed's value, else
    the mean; the CSV's CI and standard error)."""
    rule = SPECS[key].rule_for(line["protocol"], line["row"], line["column"])
    paper = None
    if rule.reference() is None:
        paper = PaperValue(line["artifact"], line["row"], line["column"], line["paper"])
    at_seed = number(line["ours_paper_seed"])
    ours = at_seed if math.isfinite(at_seed) else number(line["ours"])
    ci = (number(line["ci_low"]), number(line["ci_high"]))
    return judge(rule, paper, ours, ci, "cause", number(line["stderr"])).verdict


@pytest.mark.parametrize(("key", "csv"),
                         [pytest.param(key, csv, id=key) for key, csv in judged_reports()])
def test_a_committed_report_holds_the_verdicts_of_the_current_rules(key, csv):
    table = pd.read_csv(csv, dtype=str, keep_default_na=False)
    judged = table[table["verdict"].isin(JUDGED)]
    moved = [(line["protocol"], line["row"], line["column"], line["verdict"], now)
             for _, line in judged.iterrows()
             if (now := rejudged(key, line)) != line["verdict"]]
    assert not moved, f"{key}: re-render it (make the report's target): {moved[:5]}"


def test_the_committed_reports_under_the_current_rules_are_checked():
    keys = [key for key, _ in judged_reports()]
    assert "laplace_redux/table-3" in keys and "ssla/table-4" in keys
