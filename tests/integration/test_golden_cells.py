"""Golden cells: every experiment's jobs reproduce the stored numbers.

``tests/golden/<scale>/`` holds, per experiment, the cells, metrics and a fingerprint of the
figure arrays of every job at ``smoke`` scale (and at ``cpu`` scale for the cheap experiments),
captured before the code moved (``python -m tests.golden.capture``). Re-running each job must
give the same numbers to a relative 1e-4 (another CPU sums in another order and differs in the
last digits, which a thousand stochastic training steps amplify to ~1e-5; a code change moves
numbers by more), and a complete record. UCI jobs need the shared data files
the goldens were captured from; they are skipped on generated data. These goldens are also
the smoke-scale end-to-end test of every experiment (complete record, written to disk).
"""

from __future__ import annotations

import json
import os

import pytest

from bench.harness.records import REQUIRED_FIELDS
from tests.golden.capture import GOLDEN_DIR, mismatches, run_job
from tests.helpers import SHARED_DATA

READS_DATA_FILES = ("ssla/table-3", "ssla/table-4")


def golden_jobs(scale: str) -> list[tuple[str, str, dict]]:
    """(experiment, job key, stored entry) for every golden job of ``scale``."""
    jobs = []
    for path in sorted((GOLDEN_DIR / scale).glob("*.json")):
        experiment = path.stem.replace("__", "/")
        for key, entry in json.loads(path.read_text()).items():
            jobs.append((experiment, key, entry))
    return jobs


def _check(experiment: str, key: str, expected: dict, tmp_path, monkeypatch) -> None:
    if experiment in READS_DATA_FILES and os.environ.get("BENCH_DATA_DIR") != str(SHARED_DATA):
        pytest.skip("captured from the shared data files, which are not present")
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path))
    job = key.split(" ")
    got, record = run_job(job, with_record=True)
    assert got["status"] == "ok", record.get("traceback")
    assert set(REQUIRED_FIELDS) <= set(record)
    assert f"scale={record['scale']}" in job and f"experiment={record['experiment']}" in job
    assert record["timings"]["total_s"] > 0 and record["versions"]["torch"]
    stored = tmp_path / experiment / record["scale"] / record["config_hash"] / "record.json"
    assert json.loads(stored.read_text())["cells"] == record["cells"]
    problems = [m for part in ("cells", "metrics", "arrays")
                for m in mismatches(got[part], expected[part], part)]
    assert not problems, problems


@pytest.mark.parametrize(("experiment", "key", "expected"), golden_jobs("smoke"),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_smoke_job_reproduces_its_golden_cells(experiment, key, expected, tmp_path, monkeypatch):
    _check(experiment, key, expected, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize(("experiment", "key", "expected"), golden_jobs("cpu"),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_cpu_job_reproduces_its_golden_cells(experiment, key, expected, tmp_path, monkeypatch):
    _check(experiment, key, expected, tmp_path, monkeypatch)
