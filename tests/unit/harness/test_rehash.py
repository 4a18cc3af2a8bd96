"""Records under a folder their config no longer hashes to move to the one it does
(bench.harness.rehash): readable, their hash fields right, a taken folder left alone."""

from __future__ import annotations

import json

from bench.harness.records import (
    RECORD_NAME,
    SCHEMA_VERSION,
    config_hash,
    read_record_file,
    write_record_atomically,
)
from bench.harness.rehash import main, rehash_records

CONFIG = {"name": "ssla/table-7", "seed": 1,
          "method": {"model": {"name": "mlp", "options": {}}, "prediction": {"batch_size": 8}}}


def record(config: dict, chash: str) -> dict:
    """A minimal valid record of ``config`` that names ``chash`` as its hash."""
    return {"schema_version": SCHEMA_VERSION, "experiment": "ssla/table-7", "paper": "ssla",
            "artifact": "table-7", "scale": "smoke", "seed": 1, "protocol": "paper",
            "dataset": "d", "method": "m", "variant": "default", "config": config,
            "config_hash": chash, "status": "ok", "cells": [], "metrics": {}, "fitted": {},
            "arrays": {}, "timings": {"total_s": 1.0}, "versions": {}, "git_sha": "x",
            "git_dirty": False, "host": "h", "device": "cpu", "started_at": "t",
            "finished_at": "t", "error": None, "traceback": None}


def stored(tmp_path, folder_name: str, config: dict = CONFIG):
    folder = tmp_path / "ssla/table-7/smoke" / folder_name
    write_record_atomically(folder, record(config, folder_name))
    (folder / "job.log").write_text("run\nok\n")
    return folder


def test_a_record_under_an_old_hash_moves_to_its_config_hash(tmp_path, capsys):
    old = stored(tmp_path, "0123456789ab")
    new_name = config_hash(CONFIG)
    assert main(["--results", str(tmp_path)]) == 0
    assert f"moved: {old} -> {new_name}" in capsys.readouterr().out
    moved = old.with_name(new_name)
    assert not old.exists() and (moved / "job.log").read_text() == "run\nok\n"
    kept = read_record_file(moved / RECORD_NAME)  # its content hash checks out
    assert (kept["config_hash"], kept["rehashed_from"]) == (new_name, "0123456789ab")
    assert kept["config"] == CONFIG
    assert rehash_records(tmp_path) == []


def test_dry_run_and_a_taken_folder_move_nothing(tmp_path):
    old = stored(tmp_path, "0123456789ab")
    assert [m.new.name for m in rehash_records(tmp_path, dry_run=True)] == [config_hash(CONFIG)]
    assert old.exists()
    stored(tmp_path, config_hash(CONFIG))
    (move,) = rehash_records(tmp_path)
    assert move.taken and old.exists()
    assert json.loads((old / RECORD_NAME).read_text())["config_hash"] == "0123456789ab"
    assert main(["--results", str(tmp_path)]) == 1
