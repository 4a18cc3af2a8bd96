"""Damaged records are named, set aside and re-run; reports list them as gaps."""

from __future__ import annotations

import json
import re
import threading

import pytest

from bench.harness.errors import ConfigError
from bench.harness.job_execution import run_job
from bench.harness.records import (
    DamagedRecord,
    archive_failed_record,
    iter_records,
    read_record_file,
)
from tests.helpers import compose_config

JOB = ["experiment=ssla/table-7", "scale=smoke"]


def _run(tmp_path, *extra):
    overrides = [*JOB, f"results_dir={tmp_path}", *extra]
    return run_job(compose_config(overrides), overrides)


@pytest.fixture
def finished(tmp_path):
    outcome, record = _run(tmp_path)
    assert outcome == "ok"
    return tmp_path / "ssla/table-7/smoke" / record["config_hash"], record


def _valid(record):
    return {k: v for k, v in record.items() if not k.startswith("_")}


@pytest.mark.parametrize(("damage", "reason"), [
    (lambda text, record: text[: len(text) // 2], "invalid JSON"),
    (lambda text, record: "", "empty file"),
    (lambda text, record: "not json at all", "invalid JSON"),
    (lambda text, record: "[1, 2]", "a JSON list, not an object"),
    (lambda text, record: json.dumps({k: v for k, v in record.items() if k != "status"}),
     "missing field(s) status"),
    (lambda text, record: json.dumps({**record, "cells": [{"row": "r", "column": "c",
                                                            "value": "abc"}]}),
     "cells must be a list of {row, column, numeric value}"),
    (lambda text, record: json.dumps({**record, "schema_version": 99}), "schema_version 99"),
])
@pytest.mark.second_tier
def test_damaged_record_is_named_set_aside_and_rerun(finished, tmp_path, damage, reason):
    folder, record = finished
    path = folder / "record.json"
    path.write_text(damage(path.read_text(), _valid(record)))
    with pytest.raises(DamagedRecord, match=re.escape(reason)) as caught:
        read_record_file(path)
    assert str(path) in str(caught.value)
    damaged = []
    assert list(iter_records(tmp_path, "ssla/table-7", "smoke", damaged)) == []
    assert len(damaged) == 1 and damaged[0].path == path
    outcome, again = _run(tmp_path)
    assert outcome == "ok" and again["cells"] == record["cells"]
    assert len(list(folder.glob("record.damaged-*.json"))) == 1
    assert (folder / "job.log").exists()


def test_a_file_where_the_run_folder_belongs_is_one_line(finished, tmp_path):
    folder, _ = finished
    (folder / "record.json").unlink()
    for leftover in folder.iterdir():
        leftover.unlink()
    folder.rmdir()
    folder.write_text("not a folder")
    with pytest.raises(ConfigError, match="is a file where a run folder belongs"):
        _run(tmp_path)


def test_a_file_where_the_results_folder_belongs_stops_before_the_task(tmp_path):
    blocker = tmp_path / "blocked"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot write records to .*blocked"):
        _run(blocker)


def test_concurrent_archiving_of_one_failed_record_loses_nothing(tmp_path):
    overrides = ["task._target_=tests.helpers.failing_task"]
    outcome, record = _run(tmp_path, *overrides)
    assert outcome == "failed"
    folder = tmp_path / "ssla/table-7/smoke" / record["config_hash"]
    results = []
    threads = [threading.Thread(target=lambda: results.append(archive_failed_record(folder)))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r is not None for r in results) == 1
    assert len(list(folder.glob("record.failed-*.json"))) == 1


def test_skipping_a_failed_record_says_how_to_rerun_it(tmp_path, caplog):
    overrides = ["task._target_=tests.helpers.failing_task"]
    _run(tmp_path, *overrides)
    with caplog.at_level("INFO", logger="bench"):
        outcome, _ = _run(tmp_path, *overrides)
    assert outcome == "skipped" and "rerun_failed=true" in caplog.text


def test_a_skipped_failed_record_counts_as_a_failure_of_the_run(tmp_path, monkeypatch):
    """A run whose only job is an earlier failed record used to exit 0."""
    from bench.harness import job_execution as jobs

    overrides = ["task._target_=tests.helpers.failing_task"]
    _run(tmp_path, *overrides)
    monkeypatch.setattr(jobs, "FAILED_JOBS", [])
    outcome, record = _run(tmp_path, *overrides)
    assert outcome == "skipped" and record["status"] == "failed"
    assert len(jobs.FAILED_JOBS) == 1 and jobs.FAILED_JOBS[0].startswith(str(tmp_path))


@pytest.mark.second_tier
def test_report_lists_a_damaged_record_and_keeps_a_report_of_another_scale(tmp_path, capsys):
    from bench.cli.report_command import main as report_main

    for seed in ("seed=1", "seed=2"):
        _run(tmp_path, seed)
    damaged = sorted((tmp_path / "ssla/table-7/smoke").glob("*/record.json"))[0]
    damaged.write_text("{")
    out = tmp_path / "reports"
    args = ["ssla/table-7", "--results-dir", str(tmp_path), "--out", str(out)]
    assert report_main(args) == 0
    markdown = (out / "ssla/table-7.md").read_text()
    assert "1 damaged record(s) could not be read and are gaps here" in markdown
    assert str(damaged) in markdown
    markdown_path = out / "ssla/table-7.md"
    markdown_path.write_text(markdown.replace("Scale: smoke", "Scale: cpu"))
    assert report_main(args) == 2
    assert "holds a cpu-scale report; a smoke-scale report does not replace it" in \
        capsys.readouterr().err
    assert report_main([*args, "--replace-scale"]) == 0


@pytest.mark.second_tier
def test_versions_name_the_cpu_kernels_torch_dispatches_to():
    """Records say which vector kernels ran (AVX2 vs AVX512 results differ in the last bits,
    which long stochastic trainings amplify); ATEN_CPU_CAPABILITY changes what is recorded."""
    import os
    import subprocess
    import sys

    import torch

    from bench.harness.provenance import package_versions

    assert package_versions()["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    forced = subprocess.run(
        [sys.executable, "-c", "from bench.harness.provenance import package_versions; "
         "print(package_versions()['torch_cpu_capability'])"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "ATEN_CPU_CAPABILITY": "default"})
    assert forced.stdout.strip() == "DEFAULT"
