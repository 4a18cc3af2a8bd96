"""A record's clock: wall and CPU seconds of the job, and the machine's load around it, so a
time measured while other work shared the cores can be told from a quiet one."""

from __future__ import annotations

import os

from bench.harness.provenance import machine_load
from bench.reporting.summary import on_shared_cores
from tests.helpers import compose_config

SLEEPY = ["experiment=ssla/table-7", "scale=smoke", "task._target_=tests.helpers.sleepy_task",
          "+task.sleep_s=0.4"]


def test_a_sleeping_job_takes_wall_time_but_little_cpu_time(tmp_path):
    from bench.harness.job_execution import run_job

    overrides = [*SLEEPY, f"results_dir={tmp_path}"]
    record = run_job(compose_config(overrides), overrides)[1]
    timings = record["timings"]
    assert timings["total_s"] >= 0.4
    assert 0.0 <= timings["cpu_s"] < timings["total_s"] - 0.3
    for moment in ("at_start", "at_end"):
        load = record["machine_load"][moment]
        assert load["cores"] >= 1 and load["torch_threads"] >= 1 and load["load_1m"] >= 0.0


def test_machine_load_reads_the_load_average_and_the_cores_this_process_may_use():
    load = machine_load()
    assert load["cores"] == len(os.sched_getaffinity(0))
    assert abs(load["load_1m"] - os.getloadavg()[0]) < 2.0


def test_a_platform_without_a_load_average_records_none_and_no_verdict_on_the_cores(
        monkeypatch):
    def no_load():
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", no_load)
    load = machine_load()
    assert load["load_1m"] is None
    assert on_shared_cores({"machine_load": {"at_start": load, "at_end": load}}) is None
