"""Job logs beside records, the multirun progress line, quiet libraries."""

from __future__ import annotations

import errno
import logging
import os

import pytest

from bench.harness.job_execution import run_job
from bench.harness.logs import LOG_NAME, JobLogHandler, job_log, quiet_lightning
from bench.harness.multirun_progress import progress_line, sweep_size
from bench.harness.progress import clock, heartbeat
from tests.helpers import compose_config


def test_a_job_writes_its_log_beside_its_record_and_a_rerun_skips(tmp_path):
    overrides = ["experiment=ssla/table-7", "scale=smoke", f"results_dir={tmp_path}"]
    outcome, record = run_job(compose_config(overrides), overrides)
    assert outcome == "ok"
    logs = list(tmp_path.rglob(LOG_NAME))
    assert len(logs) == 1 and (logs[0].parent / "record.json").exists()
    text = logs[0].read_text()
    assert "run ssla/table-7 seed=42" in text and "ok ssla/table-7 seed=42" in text
    assert not list(tmp_path.rglob(".job-*.log"))
    again, same = run_job(compose_config(overrides), overrides)
    assert again == "skipped" and same["config_hash"] == record["config_hash"]


def test_multirun_size_and_progress_line():
    assert sweep_size(["experiment=ssla/table-7", "seed=1,2,3", "protocol=paper,corrected"]) == 6
    assert sweep_size(["seed=1"]) == 1
    assert sweep_size(["method=glob([ssla,assla,nn_*])", "seed=1,2"]) == 8
    assert progress_line(3, 1, 2, 8, 40.0) == \
        "[4/8] 3 done (2 skipped), 1 failed, elapsed 0:40, ETA 0:40"
    assert progress_line(0, 0, 0, 5, 1.0).endswith("ETA ?")
    assert clock(3725) == "1:02:05"


def test_quiet_lightning_raises_and_restores_its_levels():
    import lightning  # noqa: F401  (sets its loggers' levels on first import)

    pytorch_logger = logging.getLogger("lightning.pytorch")
    pytorch_logger.setLevel(logging.INFO)
    with quiet_lightning():
        assert pytorch_logger.level == logging.WARNING
        assert logging.getLogger("lightning").level == logging.WARNING
    assert pytorch_logger.level == logging.INFO


def test_a_job_log_that_cannot_be_written_costs_one_line(tmp_path, capsys, monkeypatch):
    def full_disk(self):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(JobLogHandler, "flush", full_disk)
    # Only the job log's handler: other tests' console handlers may hold closed streams.
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    with job_log(tmp_path):
        for index in range(3):
            logging.getLogger("bench").warning("line %d", index)
    err = capsys.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err
    [line] = [each for each in err.splitlines() if "job log" in each]
    assert "No space left on device" in line


def test_heartbeat_lines_come_at_a_bounded_rate_with_an_eta(caplog):
    ticks = iter(range(100))  # one second per clock read: the start, then once per step
    with caplog.at_level(logging.INFO, logger="bench.progress"):
        assert list(heartbeat(range(10), "epochs", total=10, unit="epoch", every_s=3,
                              now=lambda: next(ticks))) == list(range(10))
    lines = [r.getMessage() for r in caplog.records if r.name == "bench.progress"]
    assert lines == ["epochs: 3/10 epoch, elapsed 0:03, ETA 0:07",
                     "epochs: 6/10 epoch, elapsed 0:06, ETA 0:04",
                     "epochs: 9/10 epoch, elapsed 0:09, ETA 0:01"]


def test_a_job_without_a_terminal_writes_heartbeats_to_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_HEARTBEAT_S", "0")
    monkeypatch.setenv("BENCH_PROGRESS", "0")
    overrides = ["experiment=ssla/table-7", "scale=smoke", f"results_dir={tmp_path}",
                 "task._target_=tests.helpers.stepping_task", "+task.steps=4"]
    _, record = run_job(compose_config(overrides), overrides)
    text = (tmp_path / "ssla/table-7/smoke" / record["config_hash"] / LOG_NAME).read_text()
    assert "steps: 1/4 step, elapsed" in text and "steps: 4/4 step, elapsed" in text


def test_ctrl_c_at_the_job_s_first_line_leaves_no_temporary_log(tmp_path):
    """SIGINT can land while the job writes its first log line, before the job's own clean-up
    is entered (the Ctrl-C integration test saw a .job-*.log left under load)."""
    with pytest.raises(KeyboardInterrupt), job_log(tmp_path) as path:
        assert path.exists()
        raise KeyboardInterrupt
    assert not list(tmp_path.glob(".job-*"))


def test_a_line_that_reaches_a_closed_job_log_does_not_create_its_file_again(tmp_path):
    """Two threads on one job: the skipped one closes and removes its temporary log while the
    other still logs through the root logger's handler list, which held the closed handler;
    the file came back as a stray .job-*.log (seen under load in
    test_two_workers_on_one_job_leave_one_record)."""
    path = tmp_path / ".job-1-2.log"
    handler = JobLogHandler(path, encoding="utf-8")
    handler.close()
    path.unlink()
    handler.handle(logging.LogRecord("bench", logging.INFO, __file__, 1, "late line", None, None))
    assert not path.exists()
