"""Multiruns through ``hydra/launcher=slurm`` on a real Slurm (``make test-cluster``).

Smoke-scale jobs with one CPU each. The quick jobs are ``ssla/table-7`` at smoke scale (two
jobs, a second each); the long ones train the LeNet-5 of ``generalized_laplace/figure-3`` for as
many epochs as this machine needs for about 30 s (measured first), and checkpoint after every
epoch, so a killed or requeued job resumes. The tests kill or signal those jobs themselves once
their first checkpoint exists; none waits for a fixed time.
"""

from __future__ import annotations

import math
import pickle
import re
import subprocess
import time
from pathlib import Path

import pytest
from hydra.core.utils import JobReturn, JobStatus

from bench.harness.multirun_progress import slurm_nodes
from tests.cluster.runs import (
    COMMAND_TIMEOUT_S,
    bench_command,
    bench_environment,
    epoch_seconds,
    job_ids,
    job_logs,
    lenet_training,
    outcome,
    records,
    run_bench,
    sacct_states,
    submissions,
)
from tests.helpers import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("slurm")]

TABLE_7 = ["ssla/table-7", "--scale", "smoke"]
TABLE_7_JOBS = ["experiment=ssla/table-7", "scale=smoke", "seed=42", "protocol=paper,corrected"]
# Training long enough to be signalled or killed midway once its first checkpoint exists.
REQUEUE_TRAINING_S = 30
KILL_TRAINING_S = 30
# The signal slurmctld sends a job before its time limit: the one submitit asks for (its
# default, USR2, where SUBMITIT_PREEMPT_SIGNAL is not set).
TIME_LIMIT_SIGNAL = "USR2"


def describe(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def module_env(data_root) -> dict[str, str]:
    return bench_environment(data_root)


@pytest.fixture(scope="module")
def table_7(tmp_path_factory, module_env) -> dict:
    """Table 7 at smoke scale run locally and through Slurm (bench.reproduce --launcher)."""
    local, slurm = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("slurm")
    done_local = run_bench([*TABLE_7, "--workers", "1", "--no-report", f"results_dir={local}"],
                           module_env, module="bench.reproduce")
    assert done_local.returncode == 0, describe(done_local)
    started = time.perf_counter()
    done = run_bench([*TABLE_7, "--launcher", "slurm", f"results_dir={slurm}"], module_env,
                     module="bench.reproduce")
    return {"local": local, "slurm": slurm, "done": done,
            "seconds": time.perf_counter() - started}


def test_slurm_records_equal_a_local_run(table_7):
    assert table_7["done"].returncode == 0, describe(table_7["done"])
    local, slurm = records(table_7["local"]), records(table_7["slurm"])
    assert len(local) == 2 and sorted(local) == sorted(slurm)
    for config_hash, record in local.items():
        assert record["status"] == "ok"
        assert outcome(slurm[config_hash]) == outcome(record)
    [submission] = submissions(table_7["slurm"])
    assert len(job_ids(submission)) == 2


def test_the_submitter_prints_each_jobs_end_with_its_log_and_a_summary(table_7):
    out = table_7["done"].stdout
    assert re.search(r"^slurm: submitted 2 job\(s\) \(\d+_0, \d+_1\); logs under ", out,
                     re.M), describe(table_7["done"])
    ended = re.findall(r"^slurm job (\d+_\d) completed \(record ok\): #\d experiment=ssla/"
                       r"table-7 .*; log (\S+)$", out, re.M)
    assert len(ended) == 2 and all(Path(log).is_file() for _, log in ended), out[-3000:]
    assert "[2/2] 2 done, 0 failed" in out
    assert "slurm: 2 job(s) ended: 2 completed (records: 2 ok)" in out


def test_a_node_drained_while_a_job_pends_is_said_with_slurms_reason(tmp_path, bench_env):
    """The job is held back 8 s (sbatch --begin) so that it still pends when the test drains
    the node; the submitter then says why it waits, and the job completes once the node is
    resumed."""
    [node] = {line.strip() for line in subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True,
        check=True).stdout.splitlines()}
    results, out = tmp_path / "results", tmp_path / "stdout.txt"
    env = {**bench_env, "BENCH_SLURM_PENDING_NOTE_S": "2", "BENCH_SLURM_PENDING_REPEAT_S": "60"}
    args = ["-m", "hydra/launcher=slurm", "+hydra.launcher.additional_parameters.begin=now+8",
            "experiment=ssla/table-7", "scale=smoke", "seed=42", "protocol=paper",
            f"results_dir={results}"]
    with out.open("w") as sink:
        submitting = subprocess.Popen(bench_command(args), cwd=REPO, env=env, stdout=sink,
                                      stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while "slurm: submitted" not in out.read_text():
            assert time.monotonic() < deadline and submitting.poll() is None, "not submitted"
            time.sleep(0.2)
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=drain",
                        "reason=bench cluster test"], check=True)
        try:
            while "DRAINED" not in out.read_text():
                assert time.monotonic() < deadline and submitting.poll() is None, \
                    out.read_text()[-3000:]
                time.sleep(0.5)
        finally:
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"],
                           check=True)
        _, stderr = submitting.communicate(timeout=COMMAND_TIMEOUT_S)
    text = out.read_text()
    assert submitting.returncode == 0, f"{text[-3000:]}\n{stderr[-3000:]}"
    [line] = [line for line in text.splitlines() if "DRAINED" in line]
    assert re.fullmatch(r"slurm: 1 job\(s\) pending for up to \d+:\d\d \(\d+\); Slurm's "
                        r"reason: .*DRAINED.*", line), line
    assert re.search(r"^slurm job \d+ completed \(record ok\)", text, re.M), text[-3000:]


def test_a_resubmission_skips_the_finished_jobs(table_7, module_env):
    slurm = table_7["slurm"]
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns)
              for path in slurm.rglob("record.json")}
    started = time.perf_counter()
    done = run_bench([*TABLE_7, "--launcher", "slurm", f"results_dir={slurm}"], module_env,
                     module="bench.reproduce")
    seconds = time.perf_counter() - started
    assert done.returncode == 0, describe(done)
    after = {path: (path.read_bytes(), path.stat().st_mtime_ns)
             for path in slurm.rglob("record.json")}
    assert after == before
    assert len(submissions(slurm)) == 1  # the finished jobs were not submitted again
    assert done.stdout.count("skip ssla/table-7") == 2
    print(f"first submission {table_7['seconds']:.0f}s, resubmission {seconds:.0f}s")


def test_a_repeated_job_id_does_not_read_back_stale_results(tmp_path, bench_env):
    """A reinstalled cluster numbers its jobs from 1 again; result files a job of the same id
    left in the old fixed folder (.submitit/<job id>/) must not end the new multirun."""
    results = tmp_path / "results"
    probe = subprocess.run(["sbatch", "--parsable", "--time=1", "--output=/dev/null",
                            "--wrap=true"], capture_output=True, text=True, check=True)
    last = int(probe.stdout.strip().split(";")[0])
    stale = pickle.dumps(("success", JobReturn(status=JobStatus.COMPLETED, _return_value="ok")))
    planted = []
    for job in range(last + 1, last + 4):
        for name in (f"{job}", f"{job}_0", f"{job}_1"):
            folder = results / ".hydra" / "multirun" / ".submitit" / name
            folder.mkdir(parents=True)
            planted.append(folder / f"{name}_0_result.pkl")
            planted[-1].write_bytes(stale)
    done = run_bench(["-m", "hydra/launcher=slurm", *TABLE_7_JOBS, f"results_dir={results}"],
                     bench_env)
    assert done.returncode == 0, describe(done)
    assert [r["status"] for r in records(results).values()] == ["ok", "ok"]
    assert all(path.read_bytes() == stale for path in planted)


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory, module_env) -> dict:
    """A Slurm job whose task raises while it runs (the config itself is valid)."""
    results = tmp_path_factory.mktemp("failed")
    done = run_bench(["-m", "hydra/launcher=slurm", "experiment=ssla/table-7", "scale=smoke",
                      "protocol=paper", "task._target_=tests.helpers.failing_task",
                      f"results_dir={results}"], module_env)
    return {"results": results, "done": done}


def test_a_failed_job_leaves_a_failed_record_with_its_traceback(failed_run):
    [record] = records(failed_run["results"]).values()
    assert record["status"] == "failed"
    assert "deliberate failure" in record["error"] and "Traceback" in record["traceback"]


def test_a_failed_job_makes_the_submitting_command_exit_nonzero(failed_run):
    done = failed_run["done"]
    assert done.returncode != 0, describe(done)
    assert "1 job(s) failed (in this run" in done.stderr, describe(done)


def test_a_job_stopped_by_an_error_inside_slurm_is_its_error_line(tmp_path, bench_env):
    """No MNIST under the jobs' data root: the job stops with bench's one-line error inside
    Slurm (exit 2, no record); the submitter says that line, not submitit's traceback."""
    empty = tmp_path / "no-data"
    empty.mkdir()
    done = run_bench(["-m", "hydra/launcher=slurm", *lenet_training(epochs=1),
                      f"results_dir={tmp_path / 'results'}"],
                     {**bench_env, "BENCH_DATA_DIR": str(empty)})
    assert done.returncode == 1, describe(done)
    assert "Traceback" not in done.stdout + done.stderr, describe(done)
    assert re.search(r"^slurm job \d+ failed \(no record: error: image data set 'mnist'",
                     done.stdout, re.M), describe(done)
    assert "error: image data set 'mnist'" in done.stderr.strip().splitlines()[-1]


def one_line_error(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), \
        describe(done)
    return lines[0]


def test_the_gpu_launcher_on_nodes_without_gpus_is_one_line(tmp_path, bench_env):
    nodes, why = slurm_nodes()
    assert why is None, why
    if any(node.gpus for node in nodes):
        pytest.skip("this cluster has GPU nodes")
    done = run_bench(["-m", "hydra/launcher=slurm_gpu", *TABLE_7_JOBS, f"results_dir={tmp_path}"],
                     bench_env)
    line = one_line_error(done)
    assert "hydra/launcher=slurm_gpu asks for 1 GPU(s)" in line and "hydra/launcher=slurm" in line
    assert not submissions(tmp_path)  # nothing was submitted


@pytest.mark.parametrize("variable", ["BENCH_SLURM_CPUS", "BENCH_SLURM_MEM_GB"])
def test_asking_for_more_than_any_node_has_is_one_line(variable, tmp_path, bench_env):
    nodes, why = slurm_nodes()
    assert why is None, why
    most = {"BENCH_SLURM_CPUS": max(node.cpus for node in nodes),
            "BENCH_SLURM_MEM_GB": math.ceil(max(node.memory_mb for node in nodes) / 1024)}
    done = run_bench(["-m", "hydra/launcher=slurm", *TABLE_7_JOBS, f"results_dir={tmp_path}"],
                     {**bench_env, variable: str(most[variable] + 1)})
    assert variable in one_line_error(done)
    assert not submissions(tmp_path)


@pytest.fixture(scope="module")
def seconds_per_epoch(tmp_path_factory, module_env) -> float:
    """Seconds one LeNet-5 epoch of :func:`lenet_training` takes in a Slurm job here."""
    results = tmp_path_factory.mktemp("calibration")
    done = run_bench(["-m", "hydra/launcher=slurm", *lenet_training(epochs=4),
                      f"results_dir={results}"], module_env)
    assert done.returncode == 0, describe(done)
    seconds = epoch_seconds(results)
    print(f"{seconds:.2f}s per epoch")
    return seconds


def epochs_for(seconds: float, seconds_per_epoch: float) -> int:
    return max(6, math.ceil(seconds / seconds_per_epoch))


def training_past_its_first_checkpoint(results, env: dict[str, str], seconds_per_epoch: float,
                                       timeout_min: int = 30):
    """Submit a LeNet training job of about :data:`KILL_TRAINING_S` seconds into ``results``
    with a time limit of ``timeout_min`` and return its arguments, the submitting process and
    the Slurm job id once the job's first epoch checkpoint exists."""
    args = ["-m", "hydra/launcher=slurm", f"hydra.launcher.timeout_min={timeout_min}",
            *lenet_training(epochs_for(KILL_TRAINING_S, seconds_per_epoch)),
            f"results_dir={results}"]
    submitting = subprocess.Popen(bench_command(args), cwd=REPO, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list(results.glob("networks/**/seed-0.partial/checkpoint.pt")):
        assert time.monotonic() < deadline and submitting.poll() is None, "no checkpoint"
        time.sleep(0.5)
    [submission] = submissions(results)
    [job] = job_ids(submission)
    return args, submitting, job


def test_a_hard_killed_job_completes_when_the_multirun_is_run_again(tmp_path, bench_env,
                                                                   seconds_per_epoch):
    results = tmp_path / "results"
    args, submitting, job = training_past_its_first_checkpoint(results, bench_env,
                                                               seconds_per_epoch)
    subprocess.run(["scancel", "--signal=KILL", job], check=True)
    stdout, stderr = submitting.communicate(timeout=300)
    assert submitting.returncode == 1, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1].startswith("error: 1 job(s) failed")
    assert not records(results)
    done = run_bench(args, bench_env)
    assert done.returncode == 0, describe(done)
    [record] = records(results).values()
    assert record["status"] == "ok"
    assert "resuming" in job_logs(submissions(results)[-1])
    # The killed attempt's log is kept under a visible name beside the record.
    assert not list(results.rglob(".job-*.log"))
    [unfinished] = results.rglob("job.unfinished-*.log")
    assert "run " in unfinished.read_text()


def test_a_cancelled_job_is_one_line_and_a_failed_job_not_a_traceback(tmp_path, bench_env,
                                                                       seconds_per_epoch):
    results = tmp_path / "results"
    _, submitting, job = training_past_its_first_checkpoint(results, bench_env,
                                                            seconds_per_epoch)
    subprocess.run(["scancel", job], check=True)
    stdout, stderr = submitting.communicate(timeout=300)
    assert submitting.returncode == 1, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    assert "Traceback" not in stdout + stderr, stderr[-3000:]
    assert re.search(rf"^slurm job {job} cancelled \(no record: .*\): #0 .*; log ", stdout,
                     re.M), stdout[-3000:]
    assert "slurm: 1 job(s) ended: 1 cancelled (records: 1 no record)" in stdout
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: 1 job(s) failed") and f"slurm job {job} (CANCELLED" in last
    assert not records(results)


def test_a_job_out_of_requeues_at_its_time_limit_is_one_line(tmp_path, bench_env,
                                                             seconds_per_epoch):
    """BENCH_SLURM_REQUEUES=0: submitit stops the job at the time-limit signal (the test sends
    it once the first checkpoint exists) and raises inside it; the submitter says "timed out",
    exits 1 with one line, and prints no traceback."""
    results = tmp_path / "results"
    env = {**bench_env, "BENCH_SLURM_REQUEUES": "0"}
    _, submitting, job = training_past_its_first_checkpoint(results, env, seconds_per_epoch,
                                                            timeout_min=10)
    subprocess.run(["scancel", f"--signal={TIME_LIMIT_SIGNAL}", job], check=True)
    stdout, stderr = submitting.communicate(timeout=COMMAND_TIMEOUT_S)
    assert submitting.returncode == 1, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    assert "Traceback" not in stdout + stderr, stderr[-3000:]
    assert re.search(rf"^slurm job {job} timed out \(no record: timed out: UncompletedJobError",
                     stdout, re.M), stdout[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: 1 job(s) failed") and f"slurm job {job} (TIMEOUT" in last
    assert not records(results)


def test_a_job_sent_its_time_limit_signal_is_requeued_and_completes(tmp_path, bench_env,
                                                                   seconds_per_epoch):
    """The test causes the time-out itself, rather than hoping a short limit outlasts a job's
    start-up: once the job's first epoch checkpoint exists, it sends the job the signal
    slurmctld sends ``signal_delay_s`` before a time limit (USR2, to the job's steps). With a
    limit of 10 minutes or less submitit counts that signal as a time-out; it checkpoints the
    job and requeues it (BENCH_SLURM_REQUEUES times at most), and the next attempt resumes the
    network's training where the first one stopped. The limit itself is never reached."""
    results = tmp_path / "results"
    epochs = epochs_for(REQUEUE_TRAINING_S, seconds_per_epoch)
    env = {**bench_env, "BENCH_SLURM_TIMEOUT_MIN": "10", "BENCH_SLURM_REQUEUES": "2"}
    started = time.perf_counter()
    submitting = subprocess.Popen(
        bench_command(["-m", "hydra/launcher=slurm", *lenet_training(epochs),
                       f"results_dir={results}"]),
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + COMMAND_TIMEOUT_S  # a hung submission, not a slow one
    while not list(results.glob("networks/**/seed-0.partial/checkpoint.pt")):
        assert time.monotonic() < deadline and submitting.poll() is None, "no checkpoint"
        time.sleep(0.5)
    [submission] = submissions(results)
    [job] = job_ids(submission)
    subprocess.run(["scancel", f"--signal={TIME_LIMIT_SIGNAL}", job], check=True)
    stdout, stderr = submitting.communicate(timeout=COMMAND_TIMEOUT_S)
    assert submitting.returncode == 0, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    [record] = records(results).values()
    assert record["status"] == "ok"
    states = sacct_states(job)
    assert "REQUEUED" in states and states[-1] == "COMPLETED", states
    logs = job_logs(submission)
    assert "this job is timed-out" in logs and "Requeued job" in logs and "resuming" in logs
    said = [line for line in stdout.splitlines() if line.startswith("slurm")]
    assert re.search(rf"^slurm job {job} completed \(record ok\)", stdout, re.M), said
    assert re.search(rf"^slurm job {job} (requeued|running again)", stdout, re.M), said
    print("\n".join(said))
    print(f"{epochs} epochs, attempts {states}, {time.perf_counter() - started:.0f}s")

