"""The Slurm launcher's polling loop on fake submitit jobs (no Slurm): each job's end line, the
outcome of a job without a record (its own error line, or submitit's time-out), the failed-job
list the submitting command exits on, and what Ctrl-C says."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from bench.harness.slurm_watch import SlurmWatch, WatchedJob
from hydra_plugins.bench_launcher import reporting_slurm_launcher as launcher_module
from hydra_plugins.bench_launcher.reporting_slurm_launcher import ReportingSlurmLauncher

# submitit's exception at a time limit it does not requeue, as the job pickles it.
UncompletedJobError = type("UncompletedJobError", (Exception,),
                           {"__module__": "submitit.core.utils"})


class FakeWatcher:
    def __init__(self, states: dict[str, str]) -> None:
        self.states = states

    def update(self) -> None:
        return None

    def get_state(self, job_id: str, mode: str = "standard") -> str:
        return self.states[job_id]


class FakeJob:
    """A submitit job that has ended, with a result or an error."""

    def __init__(self, job_id: str, watcher: FakeWatcher, folder: Path, result=None,
                 error: Exception | None = None, stderr: str = "") -> None:
        self.job_id, self.watcher = job_id, watcher
        self.paths = SimpleNamespace(folder=folder, stdout=folder / f"{job_id}.out",
                                     stderr=folder / f"{job_id}.err")
        self.paths.stderr.write_text(stderr)
        self._result, self._error = result, error

    def done(self) -> bool:
        return True

    def result(self):
        if self._error is not None:
            raise self._error
        return self._result


def follow(jobs: list[FakeJob], monkeypatch, caplog) -> tuple[list[JobReturn], list[str], list]:
    failed: list[str] = []
    monkeypatch.setattr(launcher_module, "FAILED_JOBS", failed)
    monkeypatch.setattr(launcher_module, "POLL_S", 0.0)
    watch = SlurmWatch([WatchedJob(job.job_id, f"#{k}", str(job.paths.stdout))
                        for k, job in enumerate(jobs)])
    with caplog.at_level(logging.INFO, logger="bench.multirun"):
        returns = ReportingSlurmLauncher()._follow(jobs, watch, [["seed=0"]] * len(jobs))
    return returns, [r.getMessage() for r in caplog.records], failed


def test_each_end_has_its_line_and_a_job_without_record_is_a_failed_job_not_an_error(
        tmp_path, monkeypatch, caplog):
    watcher = FakeWatcher({"5_0": "COMPLETED", "5_1": "FAILED", "5_2": "COMPLETED"})
    timed_out = JobReturn(status=JobStatus.FAILED,
                          _return_value=UncompletedJobError("Job not requeued because: "
                                                            "timed-out too many times."))
    jobs = [FakeJob("5_0", watcher, tmp_path, JobReturn(status=JobStatus.COMPLETED,
                                                          _return_value="ok")),
            FakeJob("5_1", watcher, tmp_path, error=RuntimeError("srun: error: exit code 2"),
                    stderr="Traceback ...\nerror: image data set 'mnist' not found\n"),
            FakeJob("5_2", watcher, tmp_path, timed_out)]
    returns, lines, failed = follow(jobs, monkeypatch, caplog)
    assert [r.status for r in returns] == [JobStatus.COMPLETED] * 3  # Hydra re-raises nothing
    assert [r.return_value for r in returns] == ["ok", "failed", "failed"]
    ended = [line for line in lines if line.startswith("slurm job")]
    assert ended == [
        f"slurm job 5_0 completed (record ok): #0; log {tmp_path}/5_0.out",
        "slurm job 5_1 failed (no record: error: image data set 'mnist' not found): #1; log "
        f"{tmp_path}/5_1.out",
        "slurm job 5_2 timed out (no record: timed out: UncompletedJobError: Job not requeued "
        f"because: timed-out too many times.): #2; log {tmp_path}/5_2.out"]
    assert "[3/3] 1 done, 2 failed" in lines[-1]
    assert failed == [
        f"slurm job 5_1 (FAILED, error: image data set 'mnist' not found; log {tmp_path}/5_1.out)",
        "slurm job 5_2 (TIMEOUT, timed out: UncompletedJobError: Job not requeued because: "
        f"timed-out too many times.; log {tmp_path}/5_2.out)"]


def test_ctrl_c_while_following_says_the_jobs_go_on_and_how_to_stop_them(tmp_path, monkeypatch,
                                                                          caplog):
    jobs = [FakeJob(f"8_{k}", FakeWatcher({}), tmp_path) for k in range(2)]
    launcher = ReportingSlurmLauncher(submitit_folder=str(tmp_path), max_num_timeout=0)
    launcher.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "sweep")}}})
    executor = SimpleNamespace(map_array=lambda *arguments: jobs)
    monkeypatch.setattr(ReportingSlurmLauncher, "_executor", lambda self: executor)

    def interrupted(self, *arguments):
        raise KeyboardInterrupt

    monkeypatch.setattr(ReportingSlurmLauncher, "_follow", interrupted)
    with caplog.at_level(logging.INFO, logger="bench.multirun"), \
            pytest.raises(KeyboardInterrupt):
        launcher.launch([["seed=0"], ["seed=1"]], initial_job_idx=0)
    assert caplog.records[-1].getMessage() == (
        "slurm: the submitted jobs go on in Slurm (`scancel 8` stops them); running this "
        "command again skips the finished ones")
