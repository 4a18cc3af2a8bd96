"""A trial left RUNNING by a killed worker is marked failed at the next start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from bench.tuning.study import fail_stale_trials


def _running_trial(study: optuna.Study, host: str, pid: int) -> int:
    trial = study.ask()
    trial.set_user_attr("worker", {"host": host, "pid": pid})
    return trial.number


@pytest.mark.second_tier
def test_only_trials_of_stopped_workers_are_failed(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    killed = _running_trial(study, socket.gethostname(), int(dead.stdout))
    alive = _running_trial(study, socket.gethostname(), os.getpid())
    elsewhere = _running_trial(study, "another-host", 1)
    assert fail_stale_trials(study, stale_after_s=3600) == [killed]
    assert fail_stale_trials(study, stale_after_s=0) == [elsewhere]
    states = {t.number: t.state for t in study.get_trials()}
    assert states == {killed: TrialState.FAIL, alive: TrialState.RUNNING,
                      elsewhere: TrialState.FAIL}
    assert study.trials[killed].user_attrs["error"] == "its worker stopped mid-trial"
