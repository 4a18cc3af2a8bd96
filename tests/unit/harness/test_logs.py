"""Job logs beside records, the multirun progress line, quiet libraries."""

from __future__ import annotations

import logging

from bench.harness.jobs import run_job
from bench.harness.logs import LOG_NAME, quiet_lightning
from bench.harness.multirun_progress import clock, progress_line, sweep_size
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
