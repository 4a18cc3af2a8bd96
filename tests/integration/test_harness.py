"""Run wrapper, records, resume and command-line errors."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from bench.cli.interrupt import READY_FILE_VARIABLE
from bench.harness.finished_jobs import job_identity
from bench.harness.job_execution import execute
from bench.harness.overrides import CONF_DIR, group_options
from bench.harness.records import iter_records
from tests.helpers import REPO, compose_config


@pytest.fixture(autouse=True)
def children_take_sigint():
    """Commands these tests start inherit an ignored SIGINT where the tests themselves run
    with it ignored (a shell starts background jobs so: ``make test &``), and Python then
    never raises KeyboardInterrupt; give the test process Python's handler meanwhile, which
    its children start from as the default."""
    before = signal.getsignal(signal.SIGINT)
    if before is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


EXPERIMENTS = group_options()["experiment"]


def run_cli(args: list[str], results_dir, module: str = "bench.run", timeout: float = 120):
    env = {**os.environ, "BENCH_RESULTS_DIR": str(results_dir), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)




def test_same_seed_gives_the_same_cells_and_rerun_skips(tmp_path):
    overrides = ["experiment=ssla/figure-3", "scale=smoke", "method=assla"]
    first = execute(compose_config([*overrides, f"results_dir={tmp_path / 'a'}"]))
    second = execute(compose_config([*overrides, f"results_dir={tmp_path / 'b'}"]))
    assert first["cells"] == second["cells"]
    again = execute(compose_config([*overrides, f"results_dir={tmp_path / 'a'}"]))
    assert again["started_at"] == first["started_at"]
    assert len(list(iter_records(tmp_path / "a", "ssla/figure-3"))) == 1


@pytest.mark.parametrize("task, message", [
    ("tests.helpers.failing_task", "deliberate failure"),
    ("tests.helpers.nan_task", "non-finite"),
])
@pytest.mark.second_tier
def test_failures_and_non_finite_values_make_failed_records(task, message, tmp_path):
    cfg = compose_config(["experiment=ssla/table-7", "scale=smoke", f"task._target_={task}",
                          f"results_dir={tmp_path}"])
    record = execute(cfg)
    assert record["status"] == "failed"
    assert message in record["error"] and "Traceback" in record["traceback"]
    assert execute(cfg)["started_at"] == record["started_at"]  # failed is finished: skipped
    retried = execute(compose_config([*[f"task._target_={task}", "experiment=ssla/table-7"],
                                      "scale=smoke", f"results_dir={tmp_path}",
                                      "rerun_failed=true"]))
    assert retried["started_at"] >= record["started_at"]
    folder = tmp_path / "ssla/table-7/smoke" / record["config_hash"]
    assert len(list(folder.glob("record.failed-*.json"))) == 1


@pytest.mark.second_tier
@pytest.mark.parametrize("stop", [
    signal.SIGKILL,
    pytest.param(signal.SIGTERM, marks=pytest.mark.slow),
    pytest.param(signal.SIGINT, marks=pytest.mark.slow),
])
def test_killed_multirun_resumes_without_recomputing(stop, tmp_path):
    args = ["-m", "experiment=ssla/table-7", "scale=smoke",
            "task._target_=tests.helpers.sleepy_task", "+task.sleep_s=0.4",
            "seed=0,1,2,3,4,5,6,7"]
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "bench.run", *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and len(list(tmp_path.rglob("record.json"))) < 2:
        time.sleep(0.05)
    proc.send_signal(stop)
    proc.wait()
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("record.json")}
    assert 2 <= len(before) < 8
    result = run_cli(args, tmp_path)
    assert result.returncode == 0, result.stderr
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("record.json")}
    assert len(after) == 8
    assert all(after[p] == mtime for p, mtime in before.items())
    assert result.stdout.count("skip ") == len(before)
    assert not list(tmp_path.rglob(".job-*.log"))  # a killed job's log is kept visibly
    assert len(list(tmp_path.rglob("job.unfinished-*.log"))) <= 1


@pytest.mark.second_tier
def test_a_multirun_launches_only_its_unfinished_jobs(tmp_path):
    """Finished jobs are dropped before the launcher (on Slurm: not submitted again) and still
    count in the progress line."""
    jobs = ["-m", "experiment=ssla/table-7", "scale=smoke"]
    assert run_cli([*jobs, "seed=0,1"], tmp_path).returncode == 0
    more = run_cli([*jobs, "seed=0,1,2"], tmp_path)
    assert more.returncode == 0, more.stderr
    assert "Launching 1 jobs" in more.stdout and more.stdout.count("skip ssla/table-7") == 2
    assert "[3/3] 3 done (2 skipped), 0 failed" in more.stdout
    again = run_cli([*jobs, "seed=0,1,2"], tmp_path)
    assert again.returncode == 0 and "Launching" not in again.stdout
    assert again.stdout.count("skip ssla/table-7") == 3


def test_a_killed_attempts_log_is_kept_visibly_beside_the_record(tmp_path):
    cfg = compose_config(["experiment=ssla/table-7", "scale=smoke", f"results_dir={tmp_path}"])
    folder = job_identity(cfg, []).folder
    folder.mkdir(parents=True)
    (folder / ".job-4242-77.log").write_text("run ssla/table-7 seed=42\n")
    execute(cfg)
    assert not list(folder.glob(".job-*.log"))
    assert (folder / "job.unfinished-4242-77.log").read_text() == "run ssla/table-7 seed=42\n"
    assert "ok ssla/table-7" in (folder / "job.log").read_text()


@pytest.mark.parametrize("args, expected", [
    (["method=foo"], "method='foo' is not valid; choose one of: "
     + ", ".join(sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml")))),
    (["experiment=generalized_laplace/figure-3", "scale=smoke", "posterior=KFAC",
      "method.variants.KFAC.structure=foo"],
     "method.structure='foo' is not valid; choose one of: diag, kfac, ekfac, bdiag"),
    (["experiment=generalized_laplace/figure-3", "scale=smoke", "posterior=foo"],
     "posterior='foo' is not valid; choose one of: Diag, KFAC, EKFAC, KFAC-paper-like"),
    (["experiment=generalized_laplace/figure-3", "scale=smoke", "method.accumulation=sum"],
     "method.accumulation='sum' is not valid; choose one of: exact, paper-like"),
    (["experiment=generalized_laplace/figure-3", "scale=smoke", "method.temperature=0"],
     "method.temperature=0 is not valid; it must be a positive number"),
    (["experiment=ssla/table-99"], "experiment='ssla/table-99' is not valid; choose one of:"),
    (["experiment=generalized_laplace/figure-3", "scale=smoke", "temperatures=[abc]"],
     "temperatures[0]='abc' is not valid; it must be a number"),
    (["protocol.dtype=float16"], "protocol.dtype='float16' is not valid; choose one of: float32"),
    (["device=tpu"], "device='tpu' is not valid; choose one of: cpu, cuda"),
    (["no_such_key=1"], "no_such_key"),
    (["seed=glob(*)"], "seed=glob(*) is not valid; glob(...) selects options of a config group"),
    (["method=glob(zzz*)"], "method=glob(zzz*) matches no option; choose from: assla, "),
])
@pytest.mark.second_tier
def test_bad_input_is_one_line_naming_the_key(args, expected, tmp_path, capsys, monkeypatch):
    from bench.cli.run_command import main as run_main

    monkeypatch.setattr(sys, "argv", ["bench.run"])
    with pytest.raises(SystemExit) as stopped:
        run_main(["experiment=ssla/table-7", "scale=smoke", f"results_dir={tmp_path}", *args])
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert expected in lines[0]


def test_reproduce_builds_the_multirun_of_an_experiment(capsys):
    from bench.cli.reproduce_command import main as reproduce_main

    assert reproduce_main(["ssla/table-1", "--scale", "cpu", "--dry-run", "--workers", "1"]) == 0
    command = capsys.readouterr().out.strip()
    assert "seed=0,1,2,3,4,5" in command
    assert "task.n=100000,200000,300000,500000,700000,900000,1000000" in command
    assert "task.dtype=float32,float64" in command


@pytest.mark.parametrize("entry, expected", [
    ("{override:'dataset=uci_bike'}", "seeds_for[0] is not valid (keys ['override']); "
     "each entry must be {override: <swept key>=<value>, seeds: [<int>, ...]}"),
    ("{override:'dataset=uci_bike',seeds:[1]}",
     "seeds_for[0].override='dataset=uci_bike' is not valid; the sweep of dataset has no "
     "uci_bike; choose one of: uci_daily_demand, uci_real_estate"),
])
@pytest.mark.second_tier
def test_reproduce_stops_on_a_malformed_seeds_for_entry(entry, expected, tmp_path, capsys):
    from bench.cli.reproduce_command import main as reproduce_main

    status = reproduce_main(["ssla/table-4", "--scale", "smoke", "--dry-run",
                             f"results_dir={tmp_path}", f"seeds_for=[{entry}]"])
    assert status == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0] == f"error: {expected}"
    assert captured.out == "" and not any(tmp_path.iterdir())


def test_slurm_launcher_config_composes():
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from bench.harness.overrides import CONF_DIR

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["hydra/launcher=slurm_gpu", "experiment=ssla/table-1"],
                      return_hydra_config=True)
    GlobalHydra.instance().clear()
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher")
    assert cfg.hydra.launcher.gpus_per_node == 1


@pytest.mark.second_tier
def test_failed_jobs_make_multirun_and_reproduce_exit_nonzero(tmp_path):
    failing = ["task._target_=tests.helpers.failing_task"]
    run = run_cli(["-m", "experiment=ssla/table-7", "scale=smoke", "seed=1,2", *failing],
                  tmp_path)
    assert run.returncode == 1
    assert "[2/2] 0 done, 2 failed" in run.stdout
    assert "2 job(s) failed" in run.stderr
    reproduce = run_cli(["ssla/table-7", "--scale", "smoke", "--no-report", "seed=3",
                         "protocol=paper", *failing], tmp_path, module="bench.reproduce")
    assert reproduce.returncode == 1, reproduce.stderr


@pytest.mark.second_tier
def test_two_workers_on_one_job_leave_one_record(tmp_path):
    import threading

    from bench.harness.job_execution import run_job

    overrides = ["experiment=ssla/table-7", "scale=smoke", f"results_dir={tmp_path}",
                 "task._target_=tests.helpers.sleepy_task", "+task.sleep_s=0.5"]
    outcomes = []
    configs = [compose_config(overrides) for _ in range(2)]  # Hydra composes one at a time
    workers = [threading.Thread(target=lambda cfg=cfg: outcomes.append(
        run_job(cfg, overrides)[0])) for cfg in configs]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(outcomes) == ["ok", "skipped"]
    assert len(list(tmp_path.rglob("record.json"))) == 1
    assert not list(tmp_path.rglob(".record-*")) and not list(tmp_path.rglob(".job-*"))


def test_a_full_disk_while_writing_the_record_is_one_line_leaving_nothing(tmp_path, monkeypatch):
    from bench.harness import records
    from bench.harness.errors import ConfigError
    from bench.harness.job_execution import run_job

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    overrides = ["experiment=ssla/table-7", "scale=smoke", f"results_dir={tmp_path}",
                 "task._target_=tests.helpers.sleepy_task"]
    cfg = compose_config(overrides)
    monkeypatch.setattr(records.os, "fsync", full_disk)  # the record's bytes fail to reach disk
    with pytest.raises(ConfigError) as caught:
        run_job(cfg, overrides)
    message = str(caught.value)
    assert "\n" not in message and "No space left on device" in message
    assert f"{tmp_path / 'ssla/table-7/smoke'}/" in message and "record.json" in message
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # no record, temp file or log


def interrupted_in_training_task(cfg):
    """Ctrl-C as Lightning's Trainer reports it: ``sys.exit(1)`` while handling the interrupt."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        sys.exit(1)


def _assert_interrupted(returncode: int, stderr: str, results_dir) -> None:
    assert returncode == 130, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted") and "skip" in lines[0], lines
    assert not list(results_dir.rglob("record.json")) and not list(results_dir.rglob(".job-*"))


def interrupt_once_running(module: str, args: list[str], results_dir,
                           stop: signal.Signals = signal.SIGINT) -> tuple[int, str]:
    """Start ``python -m module args``, send it ``stop`` once a job has started (its temporary
    log exists) and return its exit status and standard error."""
    env = {**os.environ, "BENCH_RESULTS_DIR": str(results_dir), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not list(results_dir.rglob(".job-*")):
        time.sleep(0.05)
    proc.send_signal(stop)
    _, stderr = proc.communicate(timeout=90)
    return proc.returncode, stderr


@pytest.mark.second_tier
@pytest.mark.parametrize("mode", [[], ["-m"]], ids=["single", "multirun"])
def test_ctrl_c_is_one_line_and_exit_status_130(mode, tmp_path):
    args = [*mode, "experiment=ssla/table-7", "scale=smoke",
            "task._target_=tests.helpers.sleepy_task", "+task.sleep_s=60"]
    _assert_interrupted(*interrupt_once_running("bench.run", args, tmp_path), tmp_path)


@pytest.mark.second_tier
def test_ctrl_c_during_lightning_training_is_one_line_and_exit_status_130(tmp_path):
    result = run_cli(["experiment=ssla/table-7", "scale=smoke",
                      "task._target_=tests.integration.test_harness.interrupted_in_training_task"],
                     tmp_path)
    _assert_interrupted(result.returncode, result.stderr, tmp_path)


@pytest.mark.second_tier
def test_ctrl_c_in_reproduce_stops_its_multiruns_with_one_line_and_status_130(tmp_path):
    """SIGINT to bench.reproduce alone (as ``kill -INT``): it passes the interrupt on to its
    multiruns, which stop cleanly, and says so without a traceback."""
    args = ["ssla/table-7", "--scale", "smoke", "--workers", "1", "--no-report",
            "task._target_=tests.helpers.sleepy_task", "+task.sleep_s=60"]
    returncode, stderr = interrupt_once_running("bench.reproduce", args, tmp_path)
    assert returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert lines and all(line.startswith("interrupted") for line in lines), lines
    assert not list(tmp_path.rglob("record.json")) and not list(tmp_path.rglob(".job-*"))


@pytest.mark.second_tier
def test_sigterm_to_reproduce_stops_its_multiruns_before_it_exits(tmp_path):
    """``kill`` (SIGTERM) of bench.reproduce: its multiruns are stopped as by Ctrl-C, not left
    running on the cores after it is gone (a job still running keeps its temporary log)."""
    args = ["ssla/table-7", "--scale", "smoke", "--workers", "1", "--no-report",
            "task._target_=tests.helpers.sleepy_task", "+task.sleep_s=60"]
    returncode, stderr = interrupt_once_running("bench.reproduce", args, tmp_path,
                                                signal.SIGTERM)
    assert returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "Traceback" not in stderr
    assert not list(tmp_path.rglob("record.json")) and not list(tmp_path.rglob(".job-*"))


@pytest.mark.second_tier
@pytest.mark.parametrize("module, args", [
    ("bench.run", ["experiment=ssla/table-7", "scale=smoke"]),
    ("bench.reproduce", ["ssla/table-7", "--scale", "smoke", "--workers", "1", "--no-report"]),
], ids=["run", "reproduce"])
def test_ctrl_c_during_start_up_is_one_line_and_status_130(module, args, tmp_path):
    """SIGINT while the command still imports and checks its overrides (on a loaded machine
    this took over a minute; it printed a traceback, or 'error: ' with status 2). It is sent
    once the command says Ctrl-C is handled (its ready file), not after a fixed delay: before
    that the interpreter itself is still starting, on a loaded machine for seconds."""
    ready = tmp_path / "interruptible"
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO),
           READY_FILE_VARIABLE: str(ready)}
    proc = subprocess.Popen([sys.executable, "-m", module, *args,
                             "task._target_=tests.helpers.sleepy_task", "+task.sleep_s=60"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600  # a hung start-up, not a slow one
    while not ready.exists():
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.monotonic() < deadline, "the command never became interruptible"
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted"), lines
