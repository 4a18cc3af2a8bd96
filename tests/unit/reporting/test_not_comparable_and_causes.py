"""The verdict "not comparable" (declared by a spec, counted apart on the scoreboard) and the
cause rule: under the paper protocol a differs / close needs a cause; rendering and the index
refuse one without, summaries written before the rule are listed in FINDINGS.md instead."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench import report
from bench.reporting.compare import anchor_table, comparison_table
from bench.reporting.files import summary_path
from bench.reporting.findings import findings_markdown
from bench.reporting.index import write_overview
from bench.reporting.render import render_report
from bench.reporting.scoreboard import scoreboard_rows
from bench.reporting.spec import Anchor
from bench.reporting.specs import SPECS
from bench.reporting.summary import (
    MissingCause,
    causeless_verdicts,
    read_summaries,
    total_counts,
    write_summary,
)
from bench.reporting.verdicts import VERDICTS, Tolerance

TABLE_7 = SPECS["ssla/table-7"]
STAND_IN = "a last-layer stand-in for the paper's method"
CAUSE = "side run: the prior variance moves SSLA by 4e-3"


def record(values: dict[tuple[str, str], float], seed: int = 0, scale: str = "cpu",
           protocol: str = "paper", method: str = "ssla_assla") -> dict:
    return {"status": "ok", "seed": seed, "protocol": protocol, "scale": scale,
            "method": method, "timings": {"total_s": 1.0}, "git_sha": "f" * 40,
            "started_at": "2026-01-01T10:00:00+00:00", "finished_at": "2026-01-01T11:00:00+00:00",
            "cells": [{"row": r, "column": c, "value": v} for (r, c), v in values.items()]}


# N(0,1) agrees, N(0,0.1) SSLA differs, N(0,0.1) ASSLA is close, N(0,100) has no paper value.
VALUES = {("N(0,1)", "SSLA"): -0.0259, ("N(0,0.1)", "SSLA"): -0.0300,
          ("N(0,0.1)", "ASSLA"): -0.0260, ("N(0,100)", "SSLA"): -0.0258}


def only_for(method: str):
    """A not-comparable reason that holds only when a record of ``method`` is present."""
    return lambda records: STAND_IN if any(r["method"] == method for r in records) else ""


def verdicts_of(table) -> dict[tuple[str, str], tuple[str, str]]:
    return {(line["row"], line["column"]): (line["verdict"], line["cause"])
            for line in table.to_dict("records")}


def test_declared_cells_and_anchors_are_not_comparable_and_the_gaps_stay_gaps():
    spec = dataclasses.replace(
        TABLE_7, causes={("*", "*"): CAUSE},
        not_comparable={("N(0,0.1)", "*"): only_for("stand_in"), ("N(0,1)", "*"): "seconds",
                        ("N(0,100)", "*"): STAND_IN, ("N(0,10^6)", "*"): STAND_IN,
                        ("ratio", ""): only_for("stand_in")},
        anchors=(Anchor("ratio", "1", lambda records: 1.0, Tolerance(abs=0.1)),
                 Anchor("other", "1", lambda records: 3.0, Tolerance(abs=0.1))))
    judged = verdicts_of(comparison_table(spec, [record(VALUES)]))
    assert judged[("N(0,0.1)", "SSLA")] == ("differs", CAUSE)  # the reason says "" here
    assert judged[("N(0,1)", "SSLA")] == ("not comparable", "seconds")  # agreeing or not
    assert judged[("N(0,100)", "SSLA")][0] == "no paper value"
    assert judged[("N(0,10^6)", "SSLA")][0] == "missing"
    stand_in = [record(VALUES), record({}, method="stand_in")]
    judged = verdicts_of(comparison_table(spec, stand_in))
    assert judged[("N(0,0.1)", "SSLA")] == ("not comparable", STAND_IN)
    assert judged[("N(0,0.1)", "ASSLA")] == ("not comparable", STAND_IN)
    anchors = anchor_table(spec, stand_in).set_index("label")
    assert tuple(anchors.loc["ratio", ["verdict", "cause"]]) == ("not comparable", STAND_IN)
    assert anchors.loc["other", "verdict"] == "differs"


def test_every_matching_declaration_gives_its_reason_most_specific_first():
    spec = dataclasses.replace(TABLE_7, not_comparable={("*", "SSLA"): "seconds",
                                                        ("N(0,1)", "SSLA"): STAND_IN,
                                                        ("N(0,1)", "*"): only_for("none")})
    assert spec.not_comparable_reason("paper", "N(0,1)", "SSLA", []) == f"{STAND_IN}; seconds"
    assert spec.not_comparable_reason("paper", "N(0,1)", "ASSLA", []) == ""


def quoted_value(records: list[dict]) -> str:
    """A record-computed cause: quotes the N(0,0.1) SSLA value of the side run (method
    "side_run"); LookupError when there is none."""
    values = [c["value"] for r in records if r["method"] == "side_run" for c in r["cells"]]
    if not values:
        raise LookupError("no side run")
    return f"side run gives {values[0]:.4f}"


def test_a_cause_function_quotes_the_records_and_gives_way_when_it_cannot_read_them():
    spec = dataclasses.replace(TABLE_7, causes={("*", "*"): CAUSE,
                                                ("N(0,0.1)", "SSLA"): quoted_value})
    side = record({("other", "SSLA"): -0.0261}, method="side_run")
    judged = verdicts_of(comparison_table(spec, [record(VALUES), side]))
    assert judged[("N(0,0.1)", "SSLA")] == ("differs", "side run gives -0.0261")
    assert judged[("N(0,0.1)", "ASSLA")] == ("close", CAUSE)
    judged = verdicts_of(comparison_table(spec, [record(VALUES)]))
    assert judged[("N(0,0.1)", "SSLA")] == ("differs", CAUSE)
    assert spec.cause_for("paper", "N(0,0.1)", "SSLA", [side]) == "side run gives -0.0261"


def test_not_comparable_has_its_own_scoreboard_column_and_is_never_agrees_or_differs(tmp_path):
    spec = dataclasses.replace(TABLE_7, causes={("*", "*"): CAUSE},
                               not_comparable={("N(0,0.1)", "SSLA"): STAND_IN,
                                               ("N(0,1)", "SSLA"): STAND_IN})
    render_report(spec, [record(VALUES)], tmp_path)
    summaries = read_summaries(tmp_path)
    summary = summaries["ssla/table-7"]
    assert summary["schema_version"] == 3
    counts = summary["counts"]["paper"]
    assert (counts["not comparable"], counts["agrees"], counts["differs"], counts["close"]) == \
        (2, 0, 0, 1)
    assert list(total_counts(summary)) == list(VERDICTS)
    line = scoreboard_rows(summaries, [("ssla", "table-7")]).iloc[0]
    assert (line["not comparable"], line["agrees"], line["differs"]) == ("2", "0", "0")
    old = {**summary, "schema_version": 1}
    assert scoreboard_rows({"ssla/table-7": old}, [("ssla", "table-7")]).iloc[0][
        "not comparable"] == "—"  # judged before the verdict existed
    text = findings_markdown(summaries, [("ssla", "table-7")])
    grouped = next(line for line in text.splitlines() if line.startswith("- **not comparable"))
    assert "N(0,0.1) SSLA -0.03 vs -0.0259" in grouped and f"Cause: {STAND_IN}" in grouped
    markdown = (tmp_path / "ssla" / "table-7.md").read_text()
    assert "cells N(0,0.1) SSLA, N(0,1) SSLA: not comparable, judged by no rule" in markdown
    assert "-0.03 (-0.0259) ⊘" in markdown


def test_rendering_refuses_a_causeless_differs_or_close_and_writes_nothing(tmp_path):
    spec = dataclasses.replace(
        TABLE_7, causes={("N(0,0.1)", "ASSLA"): CAUSE},
        anchors=(Anchor("SSLA beats ASSLA", "0", lambda records: 0.5, Tolerance(abs=0.1)),))
    with pytest.raises(MissingCause) as refused:
        render_report(spec, [record(VALUES)], tmp_path)
    message = str(refused.value)
    assert message.startswith("ssla/table-7: 2 differs/close under the paper protocol without "
                              "a cause: N(0,0.1) SSLA (differs); claim 'SSLA beats ASSLA' "
                              "(differs);")
    assert "make reproduce-table-7" in message and "\n" not in message
    assert not any(tmp_path.iterdir())
    corrected = [record(VALUES, protocol="corrected")]  # a difference is the correction's
    assert render_report(dataclasses.replace(spec, anchors=()), corrected, tmp_path)
    smoke = [record(VALUES, scale="smoke")]  # plumbing runs are not judged
    assert render_report(spec, smoke, tmp_path / "smoke")


def test_cli_refuses_the_render_in_one_line(tmp_path, capsys):
    results = tmp_path / "results"
    folder = results / "ssla" / "table-7" / "cpu" / "abc"
    folder.mkdir(parents=True)
    full = {**record(VALUES), "schema_version": 1, "experiment": "ssla/table-7",
            "paper": "ssla", "artifact": "table-7", "dataset": "d", "variant": "v",
            "config": {}, "config_hash": "abc", "metrics": {}, "fitted": {}, "arrays": {},
            "versions": {}, "git_dirty": False, "error": None, "traceback": None}
    (folder / "record.json").write_text(json.dumps(full))
    code = report.main(["ssla/table-7", "--results-dir", str(results),
                        "--out", str(tmp_path / "reports")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("error: ssla/table-7: ") and "N(0,0.1) SSLA (differs)" in err


def summary_with(cause: str, schema: int, source: str = "rendered") -> dict:
    cell = {"protocol": "paper", "row": "LA/DIAG", "column": "test_acc", "paper": "0.894",
            "ours": 0.873, "verdict": "differs", "cause": cause, "unit": "",
            "link": "ssla/table-2.md#all-cells-protocol-paper"}
    claim = {"label": "KFAC / DIAG", "paper": "1.04", "ours": 3.0, "verdict": "close",
             "cause": cause, "link": "ssla/table-2.md#anchors"}
    corrected = {**cell, "protocol": "corrected", "cause": ""}
    return {"schema_version": schema, "paper": "ssla", "artifact": "table-2",
            "experiment": "ssla/table-2", "source": source, "scale": "cpu",
            "protocols": ["paper", "corrected"], "counts": {"paper": {}, "corrected": {}},
            "anchor_counts": {}, "anchors": [claim], "unconfirmed_cells": [cell, corrected],
            "status": "records", "records": None, "timings": None, "gaps": {}}


def test_the_index_refuses_a_new_summary_without_causes(tmp_path, capsys):
    assert causeless_verdicts(summary_with("", 2)) == ["LA/DIAG test_acc (differs)",
                                                       "claim 'KFAC / DIAG' (close)"]
    write_summary(summary_path("ssla", "table-2", tmp_path), summary_with("", 2))
    with pytest.raises(MissingCause, match="ssla/table-2: 2 differs/close"):
        write_overview(tmp_path)
    assert not (tmp_path / "FINDINGS.md").exists()
    assert report.main(["--index", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ssla/table-2: 2 differs/close under the paper protocol")
    assert len(err.splitlines()) == 1
    write_summary(summary_path("ssla", "table-2", tmp_path), summary_with(CAUSE, 2))
    assert len(write_overview(tmp_path)) == 3


@pytest.mark.parametrize(("schema", "source"), [(1, "rendered"), (2, "backfilled")])
def test_findings_list_older_summaries_without_causes_in_their_own_section(tmp_path, schema,
                                                                           source):
    write_summary(summary_path("ssla", "table-2", tmp_path), summary_with("", schema, source))
    paths = write_overview(tmp_path)  # not refused
    text = paths[1].read_text()
    lines = text.splitlines()
    section = lines.index("## Rendered before causes were required")
    assert section < lines.index("## ssla")
    listed = next(line for line in lines[section:] if line.startswith("- [ssla table-2]"))
    assert (f"(summary {source}, schema {schema}): 2 differs/close without a cause, re-render "
            "with `make reproduce-table-2`: LA/DIAG test_acc (differs); claim "
            "'KFAC / DIAG' (close).") in listed
    differs = next(line for line in lines if line.startswith("- **differs** · protocol paper"))
    assert differs.endswith("No cause given.")


def test_a_failure_note_is_not_a_cause():
    summary = {"scale": "cpu", "protocols": ["paper"], "anchors": [], "unconfirmed_cells": [
        {"row": "SSLA", "column": "kl", "verdict": "differs", "protocol": "paper",
         "cause": "1 run(s) failed: RuntimeError: nan"},
        {"row": "ASSLA", "column": "kl", "verdict": "close", "protocol": "paper",
         "cause": f"{CAUSE}; 2 run(s) failed: RuntimeError: nan"}]}
    assert causeless_verdicts(summary) == ["SSLA kl (differs)"]


def test_a_cause_function_that_cannot_read_the_records_falls_back_to_the_spec_cause():
    def broken(records):
        return f"{1 / 0}"

    anchor = Anchor("ratio", "1", lambda records: 5.0, Tolerance(abs=0.1), cause=broken)
    spec = dataclasses.replace(TABLE_7, anchors=(anchor,), causes={("ratio", ""): CAUSE})
    line = anchor_table(spec, [record({})]).iloc[0]
    assert (line["verdict"], line["cause"]) == ("differs", CAUSE)
    bare = dataclasses.replace(spec, causes={})
    assert anchor_table(bare, [record({})]).iloc[0]["cause"] == ""
