"""A report names the rows its experiment has that no record has yet (records that predate a
new row, or jobs not run at this scale), instead of leaving a reader to find the gap."""

from __future__ import annotations

from bench.reporting.markdown import rows_without_records
from bench.reporting.spec import ArtifactSpec


def spec(*rows: str) -> ArtifactSpec:
    return ArtifactSpec(paper="ggn_thesis", artifact="figure-5.4", title="t", row_order=rows)


def record(*rows: str) -> dict:
    return {"status": "ok", "cells": [{"row": row, "column": "c", "value": 1.0} for row in rows]}


def test_named_rows_without_a_cell_are_listed_in_order():
    assert rows_without_records(spec("VOGGN", "L-GGN", "reference-VI", "* / MAP"),
                                [record("VOGGN"), record("L-GGN")]) == ["reference-VI"]


def test_nothing_is_listed_without_records_or_when_every_row_has_one():
    assert rows_without_records(spec("VOGGN", "reference-VI"), []) == []
    assert rows_without_records(spec("VOGGN"), [record("VOGGN", "extra")]) == []
