"""A job's start-up: the seconds its record shows, a single run without Hydra's mode probe,
and the exit without the interpreter's teardown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import process_clock
from bench.harness.process_clock import seconds_since_process_start
from tests.helpers import compose_config

SLEEPY = ["experiment=ssla/table-7", "scale=smoke", "task._target_=tests.helpers.sleepy_task"]


@pytest.mark.second_tier
def test_seconds_since_process_start_counts_the_time_before_the_call():
    code = ("import time; time.sleep(0.6); "
            "from bench.harness.process_clock import seconds_since_process_start as s; print(s())")
    shown = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout)
    assert 0.6 <= shown < 30.0


def test_seconds_since_process_start_is_none_without_proc(tmp_path):
    assert seconds_since_process_start(tmp_path) is None


def test_only_the_first_job_of_a_process_records_its_start_up(tmp_path, monkeypatch):
    from bench.harness.job_execution import run_job

    monkeypatch.setattr(process_clock, "_first_job_taken", False)
    records = []
    for seed in (1, 2):
        overrides = [*SLEEPY, f"results_dir={tmp_path}", f"seed={seed}"]
        records.append(run_job(compose_config(overrides), overrides)[1])
    assert records[0]["timings"]["startup_s"] > 0.0
    assert "startup_s" not in records[1]["timings"]


def test_a_single_run_does_not_compose_a_config_to_probe_hydras_mode(tmp_path, monkeypatch):
    from hydra._internal.hydra import Hydra

    from bench.cli import run_command

    def probe(*args, **kwargs):
        raise AssertionError("hydra.main's mode probe composed the config again")

    monkeypatch.setattr(Hydra, "get_mode", probe)
    monkeypatch.setattr(run_command, "FAILED_JOBS", [])  # failures of other tests in this process
    monkeypatch.setattr(sys, "argv", ["bench.run"])
    run_command.main([*SLEEPY, f"results_dir={tmp_path}"])
    (record_file,) = tmp_path.glob("ssla/table-7/smoke/*/record.json")
    record = json.loads(record_file.read_text())
    assert record["status"] == "ok"
    assert record["config"]["task"]["_target_"] == "tests.helpers.sleepy_task"


@pytest.mark.second_tier
@pytest.mark.parametrize(("status", "code", "stderr"), [
    (None, 0, ""), (3, 3, ""), ("stopped: a message", 1, "stopped: a message\n")])
def test_exit_now_exits_as_system_exit_after_atexit_handlers(status, code, stderr):
    script = ("import atexit; from bench.cli.interrupt import exit_now; "
              "atexit.register(lambda: print('handler ran')); "
              f"print('before', end=' '); exit_now({status!r})")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == code
    assert done.stdout == "before handler ran\n"
    assert done.stderr == stderr
