"""Faults of jobs run by a cluster launcher in other processes (issue 25 items 1, 2, 6): a
job the launcher stops at its time limit leaves no failed record, failures of jobs in other
processes reach the submitting command's exit status, and progress lines are not printed
inside each job."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from bench.cli import run_command as run_cli
from bench.harness.job_execution import (
    FAILED_JOBS_DIR_ENV,
    failed_job_markers,
    is_launcher_stop,
    run_job,
)
from bench.harness.multirun_progress import MultirunProgress
from tests.helpers import REPO, compose_config

# submitit's exception as the job sees it (submitit.core.utils.UncompletedJobError): matched by
# its name and module, as bench.harness.job_execution matches it without importing submitit.
UncompletedJobError = type("UncompletedJobError", (RuntimeError,),
                           {"__module__": "submitit.core.utils"})


def stopped_by_the_launcher(cfg):
    """A task interrupted as submitit interrupts one at a time limit it does not requeue."""
    raise UncompletedJobError("Job not requeued because: timed-out too many times.")


def test_a_job_stopped_at_its_time_limit_leaves_no_failed_record(tmp_path):
    assert is_launcher_stop(UncompletedJobError("x")) and not is_launcher_stop(RuntimeError())
    cfg = compose_config(["experiment=ssla/table-7", "scale=smoke", "protocol=paper",
                          f"task._target_={__name__}.stopped_by_the_launcher",
                          f"results_dir={tmp_path}"])
    with pytest.raises(UncompletedJobError):
        run_job(cfg)
    assert not [path for path in tmp_path.rglob("*") if path.is_file()]


@pytest.mark.second_tier
def test_a_failure_noted_by_a_job_in_another_process_reaches_the_submitting_command(
        tmp_path, monkeypatch, capsys):
    folder = tmp_path / "ssla" / "table-7" / "smoke" / "0123456789ab"

    def remote_job() -> None:
        # What a job in another process (a Slurm node) does: it inherits the environment.
        code = ("from pathlib import Path; "
                "from bench.harness.job_execution import note_failed_job; "
                f"note_failed_job(Path({str(folder)!r}))")
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env=os.environ)

    monkeypatch.setattr(run_cli, "hydra_main", remote_job)
    monkeypatch.setattr(run_cli, "FAILED_JOBS", [])  # failures of other tests in this process
    with pytest.raises(SystemExit) as stop:
        run_cli.main(["-m", "experiment=ssla/table-7", "scale=smoke", f"results_dir={tmp_path}"])
    assert stop.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: 1 job(s) failed (in this run or, skipped, in an earlier one: "
                   "rerun_failed=true runs those again); their records hold the tracebacks: "
                   f"{folder}"]
    assert FAILED_JOBS_DIR_ENV not in os.environ
    assert not list((tmp_path / ".hydra").glob("failed-jobs-*"))


def test_markers_name_each_failed_folder_once(tmp_path):
    assert failed_job_markers(tmp_path / "absent") == []
    (tmp_path / "a").write_text("/r/x", encoding="utf-8")
    (tmp_path / "b").write_text("/r/y", encoding="utf-8")
    assert failed_job_markers(tmp_path) == ["/r/x", "/r/y"]


def test_no_progress_line_inside_a_job_run_by_submitit(monkeypatch, caplog):
    progress = MultirunProgress()
    progress.total = 3
    done = SimpleNamespace(return_value="ok")
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    with caplog.at_level(logging.INFO):
        progress.on_job_end(None, done)
    assert "[1/3]" not in caplog.text
    monkeypatch.delenv("SUBMITIT_EXECUTOR")
    with caplog.at_level(logging.INFO):
        progress.on_job_end(None, done)
    assert "[1/3]" in caplog.text

