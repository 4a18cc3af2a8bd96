"""Two tuning workers with one ``worker`` index would propose the same parameters: the second
is refused with one line. ``study=`` that does not read as a name is one line too."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import optuna
import pytest

from bench.cli.tune_command import tune
from bench.harness.errors import ConfigError
from bench.tuning.config import check_config, compose_tune
from bench.tuning.study import open_storage
from tests.helpers import REPO
from tests.unit.tuning.test_tune import quadratic, run_cli, toy_config


def slow_quadratic(params: dict, seed: int, **options) -> float:
    """The toy objective, a quarter of a second per trial (a worker that stays busy)."""
    time.sleep(0.25)
    return quadratic(params, seed)


def _trial_count(storage) -> int:
    try:
        return len(optuna.load_study(study_name="mlp", storage=open_storage(str(storage))).trials)
    except KeyError:  # the worker has not created the study yet
        return 0


@pytest.mark.second_tier
def test_a_second_worker_with_the_same_index_is_refused(tmp_path):
    storage = tmp_path / "shared.log"
    target = "objective.target=tests.unit.tuning.test_worker_index.slow_quadratic"
    args = ["space=mlp", target, "trials=400", "threads=0", f"storage={storage}", "worker=0"]
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    busy = subprocess.Popen([sys.executable, "-m", "bench.tune", *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _trial_count(storage) < 1:
            assert busy.poll() is None, busy.stderr.read()
            assert time.monotonic() < deadline, "the first worker never started a trial"
            time.sleep(0.2)
        with pytest.raises(ConfigError, match=r"worker=0 .*already.*worker=") as caught:
            tune(toy_config(storage, target, "trials=400", "worker=0"))
        assert "\n" not in str(caught.value)
        assert tune(toy_config(storage, target, "trials=1", "worker=1"))["ran"] <= 1
    finally:
        busy.kill()
        busy.wait()
    # A killed worker's index is free again at once.
    total = _trial_count(storage)
    assert tune(toy_config(storage, target, f"trials={total + 1}", "worker=0"))["ran"] >= 1


@pytest.mark.parametrize("value", ["nan", "12", "null", "[a]", "''"])
@pytest.mark.second_tier
def test_a_study_that_does_not_read_as_a_name_is_one_line(value, tmp_path):
    with pytest.raises(ConfigError) as caught:
        check_config(compose_tune(["space=mlp", f"study={value}"]))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("study=")
    assert "a non-empty text name" in message and "study=mlp" in message
    if value in ("nan", "12", "null"):
        assert f"study='{value}'" in message, "a value that reads as a number or null is quoted"


def test_a_quoted_study_name_is_a_name():
    assert compose_tune(["space=mlp", "study='nan'"]).study == "nan"
    check_config(compose_tune(["space=mlp", "study='nan'"]))


@pytest.mark.second_tier
def test_study_nan_on_the_command_line_is_one_line(tmp_path):
    result = run_cli(["space=mlp", "study=nan"], tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: study=nan is not valid") and "study='nan'" in lines[0]


@pytest.mark.second_tier
def test_workers_create_a_new_sqlite_study_one_at_a_time(tmp_path, monkeypatch):
    """Two workers starting together on a new SQLite file both created its tables and one
    died on 'table study_directions already exists'; creating a study now waits for a lock
    beside the file. While the test holds that lock a worker does not reach create_study."""
    import threading

    from bench.tuning import study as study_module

    storage = str(tmp_path / "new.db")
    entered = threading.Event()
    create = optuna.create_study

    def watched_create(*args, **kwargs):
        entered.set()
        return create(*args, **kwargs)

    monkeypatch.setattr(study_module.optuna, "create_study", watched_create)
    worker = threading.Thread(target=study_module.load_study,
                              args=("mlp", storage, 0, 1, "minimize", {"space": {}}))
    with study_module.creation_lock(storage):
        worker.start()
        assert not entered.wait(timeout=0.5)
    worker.join(timeout=60)
    assert entered.is_set() and not worker.is_alive()
    assert len(optuna.load_study(study_name="mlp", storage=f"sqlite:///{storage}").trials) == 0
