"""A protocol the experiment sweeps but the reported scale has no records of is shown as
missing, not left out of the report."""

from __future__ import annotations

import dataclasses

from bench.harness.records import config_hash, iter_records, record_dir, write_record_atomically
from bench.reporting.compare import comparison_table, ordered_protocols
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from bench.reporting.verdicts import MISSING

SPEC = dataclasses.replace(SPECS["ssla/table-7"], causes={("*", "*"): "made-up test records"})
SWEEP = {"protocol": ["paper", "corrected"]}


def _write(results, scale: str, protocol: str, sweep: dict | None = SWEEP) -> None:
    config = {"seed": 0, "protocol": {"name": protocol}, "scale": {"name": scale},
              **({"sweep": sweep} if sweep else {})}
    record = {
        "schema_version": 1, "experiment": "ssla/table-7", "paper": "ssla",
        "artifact": "table-7", "scale": scale, "seed": 0, "protocol": protocol,
        "dataset": "prior_modularity", "method": "ssla_assla", "variant": "default",
        "config": config, "config_hash": config_hash(config), "status": "ok",
        "cells": [{"row": "N(0,1)", "column": "SSLA", "value": -0.0259}], "metrics": {},
        "fitted": {}, "arrays": {}, "timings": {"total_s": 0.01},
        "versions": {"torch": "2.14.1"}, "git_sha": "a" * 40,
        "started_at": "2025-01-01T00:00:00+00:00", "finished_at": "2025-01-01T00:00:01+00:00",
        "traceback": None,
    }
    write_record_atomically(record_dir(results, "ssla/table-7", scale, config_hash(config)),
                           record)


def test_a_swept_protocol_without_records_at_this_scale_is_shown_missing(tmp_path):
    for protocol in ("paper", "corrected"):
        _write(tmp_path, "smoke", protocol)
    _write(tmp_path, "cpu", "paper")
    records = list(iter_records(tmp_path, "ssla/table-7", "cpu"))
    assert ordered_protocols(records) == ["paper", "corrected"]
    table = comparison_table(SPEC, records)
    corrected = table[table["protocol"] == "corrected"]
    assert len(corrected) == len(table[table["protocol"] == "paper"])
    assert set(corrected["verdict"]) == {MISSING}
    markdown = next(p for p in render_report(SPEC, records, tmp_path / "out")
                    if p.suffix == ".md").read_text()
    assert "## Compact table (protocol corrected)" in markdown
    assert "Protocols: paper, corrected" in markdown


def test_records_without_a_protocol_sweep_show_their_own_protocols(tmp_path):
    _write(tmp_path, "cpu", "paper", sweep=None)
    records = list(iter_records(tmp_path, "ssla/table-7", "cpu"))
    assert ordered_protocols(records) == ["paper"]
    assert set(comparison_table(SPEC, records)["protocol"]) == {"paper"}
