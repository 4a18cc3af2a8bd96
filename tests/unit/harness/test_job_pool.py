"""One worker queue for several experiments (``bench.cli.job_pool``): a free worker takes the
next experiment's multirun, each experiment's report follows its own jobs, statuses combine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.cli import reproduce_command as reproduce
from bench.cli.job_pool import ExperimentPlan, combined_status, run_plans


def _appends(log: Path, word: str, sleep_s: float = 0.0, status: int = 0) -> list[str]:
    code = (f"import sys, time; time.sleep({sleep_s}); "
            f"open(r'{log}', 'a').write('{word}\\n'); sys.exit({status})")
    return [sys.executable, "-c", code]


def _lines(log: Path) -> list[str]:
    return log.read_text().split()


@pytest.mark.second_tier
def test_a_free_worker_takes_the_next_experiment_and_its_report_follows_its_own_jobs(tmp_path):
    log = tmp_path / "log"
    plans = [ExperimentPlan("a", [_appends(log, "a-job", sleep_s=1.5)], _appends(log, "a-report")),
             ExperimentPlan("b", [_appends(log, "b-job")], _appends(log, "b-report"))]
    assert run_plans(plans, workers=2) == [0, 0]
    assert _lines(log) == ["b-job", "b-report", "a-job", "a-report"]


@pytest.mark.second_tier
def test_one_worker_keeps_the_plans_in_order(tmp_path):
    log = tmp_path / "log"
    plans = [ExperimentPlan("a", [_appends(log, "a1"), _appends(log, "a2")],
                            _appends(log, "a-report")),
             ExperimentPlan("b", [_appends(log, "b1")], None)]
    assert run_plans(plans, workers=1) == [0, 0]
    assert _lines(log)[:2] == ["a1", "a2"]
    assert set(_lines(log)) == {"a1", "a2", "a-report", "b1"}


@pytest.mark.second_tier
def test_failed_jobs_still_render_their_report_and_a_hard_status_does_not(tmp_path):
    log = tmp_path / "log"
    plans = [ExperimentPlan("failed-job", [_appends(log, "f", status=1), _appends(log, "g")],
                            _appends(log, "failed-job-report")),
             ExperimentPlan("broken", [_appends(log, "h", status=2)], _appends(log, "no")),
             ExperimentPlan("bad-report", [], _appends(log, "bad-report", status=3)),
             ExperimentPlan("records-only", [_appends(log, "i")], None)]
    assert run_plans(plans, workers=2) == [1, 2, 3, 0]
    assert "failed-job-report" in _lines(log) and "no" not in _lines(log)
    assert combined_status([0, 1, 0]) == 1
    assert combined_status([1, 3, 2]) == 3
    assert combined_status([0, 0]) == 0


def test_artifacts_and_overrides_are_told_apart():
    assert reproduce.split_items(["ssla/table-1", "device=cuda", "ssla/table-4", "~task.x",
                                  "+extra=1"]) == (["ssla/table-1", "ssla/table-4"],
                                                   ["device=cuda", "~task.x", "+extra=1"])


def test_several_artifacts_run_each_experiment_once_in_the_order_given(capsys):
    assert reproduce.main(["ssla/table-2", "ssla/figure-2", "ssla/table-1", "--scale", "smoke",
                           "--dry-run", "--workers", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[3] for line in lines] == ["experiment=ssla/table-2",
                                                   "experiment=ssla/table-1"]


def test_no_artifact_and_no_all_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        reproduce.main(["--scale", "smoke", "--dry-run"])
    assert exit_.value.code == 2
    assert "name an artifact" in capsys.readouterr().err


def test_fewer_multiruns_than_workers_leave_the_cores_to_the_ones_there_are(monkeypatch):
    seen = []
    monkeypatch.setattr(reproduce, "run_and_report",
                        lambda plans, workers: seen.append((len(plans[0].commands), workers)))
    reproduce.main(["ggn_thesis/figure-5.6", "--scale", "smoke", "--workers", "2"])
    reproduce.main(["ssla/table-1", "--scale", "smoke", "--workers", "2"])
    assert seen[0] == (1, 1)
    assert seen[1][0] >= 2 and seen[1][1] == 2


@pytest.mark.second_tier
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_workers_die_with_a_killed_parent(tmp_path):
    """SIGKILL of bench.reproduce left its workers running until their jobs ended."""
    import os
    import signal
    import subprocess
    import time

    pid_file = tmp_path / "worker.pid"
    worker = (f"import os, time; open(r'{pid_file}', 'w').write(str(os.getpid())); "
              "time.sleep(600)")
    parent = ("import sys; from bench.cli.job_pool import ExperimentPlan, run_plans; "
              f"run_plans([ExperimentPlan('a', [[sys.executable, '-c', {worker!r}]])], "
              "workers=1)")
    process = subprocess.Popen([sys.executable, "-c", parent], cwd=Path(__file__).parents[3])
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.1)
    worker_pid = int(pid_file.read_text())
    process.send_signal(signal.SIGKILL)
    process.wait()
    while time.monotonic() < deadline:
        try:
            os.kill(worker_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(worker_pid, signal.SIGKILL)
    pytest.fail("the worker outlived its killed parent")
