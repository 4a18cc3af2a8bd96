"""Records carry a content hash checked on reading; leftovers of killed writes are cleaned up;
a file where a run folder belongs is named as damaged."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bench.harness.records import (
    DamagedRecord,
    config_hash,
    iter_records,
    read_record,
    read_record_file,
    record_dir,
    write_record_atomically,
)

EXPERIMENT, SCALE = "ssla/table-7", "smoke"
HASH_FIELD = "record_sha256"


def _record(seed: int) -> dict:
    config = {"seed": seed, "protocol": {"name": "paper"}, "scale": {"name": SCALE}}
    return {
        "schema_version": 1, "experiment": EXPERIMENT, "paper": "ssla", "artifact": "table-7",
        "scale": SCALE, "seed": seed, "protocol": "paper", "dataset": "prior_modularity",
        "method": "ssla_assla", "variant": "default", "config": config,
        "config_hash": config_hash(config), "status": "ok",
        "cells": [{"row": "N(0,1)", "column": "SSLA", "value": -0.0259}],
        "metrics": {"nll": 1.5, "nan_metric": float("nan")}, "fitted": {1: "int key"},
        "arrays": {}, "timings": {"total_s": 0.01}, "versions": {"torch": "2.14.1"},
        "git_sha": "a" * 40, "started_at": "2025-01-01T00:00:00+00:00",
        "finished_at": "2025-01-01T00:00:01+00:00", "traceback": None,
    }


def _folder(results: Path, seed: int) -> Path:
    return record_dir(results, EXPERIMENT, SCALE, config_hash(_record(seed)["config"]))


def _write(results: Path, seed: int) -> Path:
    return write_record_atomically(_folder(results, seed), _record(seed))


def test_a_written_record_carries_a_hash_that_reading_checks(tmp_path):
    path = _write(tmp_path, 0)
    stored = json.loads(path.read_text())
    assert len(stored[HASH_FIELD]) == 64
    assert read_record_file(path)["cells"][0]["value"] == -0.0259


def test_a_tampered_but_valid_value_makes_the_record_damaged(tmp_path):
    path = _write(tmp_path, 0)
    _write(tmp_path, 1)
    path.write_text(path.read_text().replace("-0.0259", "-0.0199"))
    with pytest.raises(DamagedRecord, match="content hash") as caught:
        read_record_file(path)
    assert str(path) in str(caught.value)
    damaged: list = []
    assert [r["seed"] for r in iter_records(tmp_path, EXPERIMENT, SCALE, damaged)] == [1]
    assert [err.path for err in damaged] == [path]


def test_deleting_the_hash_of_a_schema_2_record_does_not_switch_the_check_off(tmp_path):
    """The issue's case: without record_sha256 an edited value of 999 was read as valid."""
    folder = _folder(tmp_path, 0)
    folder.mkdir(parents=True)
    edited = {**_record(0), "schema_version": 2,
              "cells": [{"row": "N(0,1)", "column": "SSLA", "value": 999.0}]}
    (folder / "record.json").write_text(json.dumps(edited))
    with pytest.raises(DamagedRecord, match="no record_sha256, which every schema 2 record "
                                            "carries"):
        read_record(folder)


def test_a_record_written_before_hashes_existed_is_still_read(tmp_path):
    folder = _folder(tmp_path, 0)
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps(_record(0)))
    assert read_record(folder)["seed"] == 0
    assert [r["seed"] for r in iter_records(tmp_path, EXPERIMENT, SCALE)] == [0]


def _orphans(folder: Path) -> tuple[Path, Path]:
    """A temporary file a killed writer left an hour ago, and one a live writer holds now."""
    folder.mkdir(parents=True, exist_ok=True)
    old, fresh = folder / ".record-killed.tmp", folder / ".record-live.tmp"
    old.write_text('{"half": ')
    fresh.write_text('{"half": ')
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    return old, fresh


def test_writing_a_record_removes_stale_temporary_files_of_killed_writers(tmp_path):
    old, fresh = _orphans(_folder(tmp_path, 0))
    _write(tmp_path, 0)
    assert not old.exists() and fresh.exists()


@pytest.mark.parametrize("read", [
    lambda results, folder: read_record(folder),
    lambda results, folder: list(iter_records(results, EXPERIMENT, SCALE)),
])
def test_reading_records_removes_stale_temporary_files_of_killed_writers(tmp_path, read):
    folder = _folder(tmp_path, 0)
    old, fresh = _orphans(folder)
    read(tmp_path, folder)
    assert not old.exists() and fresh.exists()


def test_a_file_where_a_run_folder_belongs_is_reported_damaged(tmp_path):
    _write(tmp_path, 0)
    stray = tmp_path / EXPERIMENT / SCALE / "0123456789ab"
    stray.write_text("not a folder")
    damaged: list = []
    assert [r["seed"] for r in iter_records(tmp_path, EXPERIMENT, SCALE, damaged)] == [0]
    assert [err.path for err in damaged] == [stray]
    assert "a file where a run folder belongs" in str(damaged[0])
    damaged = []
    assert len(list(iter_records(tmp_path, EXPERIMENT, None, damaged))) == 1
    assert [err.path for err in damaged] == [stray]
