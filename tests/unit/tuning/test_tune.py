"""Optuna tuning entry point: studies, resume, failed trials, export, shipped values, CLI."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import optuna
import pytest
import yaml
from omegaconf import OmegaConf

from bench.cli.tune_command import tune
from bench.harness.errors import ConfigError
from bench.harness.overrides import CONF_DIR
from bench.tuning.config import compose_tune
from bench.tuning.space import to_fields
from bench.tuning.study import open_storage
from tests.helpers import REPO

TUNED = CONF_DIR / "tuned" / "paper"
UCI_DATASETS = ("airfoil", "auto_mpg", "bike_sharing", "concrete", "daily_demand",
                "liver_disorders", "real_estate", "wine_quality")


def quadratic(params: dict, seed: int, **options) -> float:
    """Toy objective with its minimum at lr 0.05, batch size 64."""
    return 100 * (params["lr"] - 0.05) ** 2 + abs(params["batch_size"] - 64) / 64


def flaky(params: dict, seed: int, **options) -> float:
    """Raises for batch size 32, returns inf for 256, else the quadratic."""
    if params["batch_size"] == 32:
        raise RuntimeError("deliberate failure")
    if params["batch_size"] == 256:
        return math.inf
    return quadratic(params, seed)


def toy_config(storage, *overrides: str):
    return compose_tune(["space=mlp", "objective.target=tests.unit.tuning.test_tune.quadratic",
                         f"storage={storage}", "threads=0", *overrides])


def trials_of(storage, study: str = "mlp") -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=study, storage=open_storage(str(storage))).trials


def run_cli(args: list[str], tmp_path):
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "bench.tune", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.second_tier
def test_study_continues_to_its_total_and_exports_the_best_trial(tmp_path):
    storage, out = tmp_path / "tune.db", tmp_path / "tuned" / "mlp.yaml"
    first = tune(toy_config(storage, "trials=3"))
    assert first["ran"] == 3 and first["counts"]["complete"] == 3
    second = tune(toy_config(storage, "trials=5", f"export={out}"))
    assert second["ran"] == 2 and second["finished"] == 5
    assert tune(toy_config(storage, "trials=5"))["ran"] == 0
    trials = trials_of(storage)
    assert len(trials) == 5
    assert len({t.params["lr"] for t in trials}) == 5, "a rerun must not repeat earlier points"
    best = min(trials, key=lambda t: t.value)
    text = out.read_text()
    assert yaml.safe_load(text) == best.params == second["best_params"]
    assert "# study: mlp" in text and "# completed trials: 5 of 5" in text
    assert f"# best value: {best.value!r}" in text and "# git sha: " in text
    with pytest.raises(ConfigError, match="export=.*overwrite=true"):
        tune(toy_config(storage, "trials=5", f"export={out}"))
    tune(toy_config(storage, "trials=5", f"export={out}", "overwrite=true"))
    with pytest.raises(ConfigError, match="objective.max_epochs"):
        tune(toy_config(storage, "trials=6", "objective.max_epochs=7"))


def test_failed_trials_are_recorded_and_the_study_finishes(tmp_path):
    storage = tmp_path / "tune.log"  # an Optuna journal file, as shared by cluster workers
    summary = tune(toy_config(storage, "trials=10",
                              "objective.target=tests.unit.tuning.test_tune.flaky"))
    trials = trials_of(storage)
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(trials) == 10 and len(failed) + len(complete) == 10
    assert failed and complete and summary["counts"]["fail"] == len(failed)
    errors = {t.user_attrs["error"] for t in failed}
    assert "RuntimeError: deliberate failure" in errors and "objective returned inf" in errors
    assert all(t.params["batch_size"] in (32, 256) for t in failed)


def test_same_seed_proposes_the_same_first_params(tmp_path):
    def proposals(name: str, seed: int) -> list[dict]:
        tune(toy_config(tmp_path / f"{name}.log", "trials=3", f"seed={seed}"))
        return [t.params for t in trials_of(tmp_path / f"{name}.log")]

    assert proposals("a", 42) == proposals("b", 42) != proposals("c", 7)


@pytest.mark.second_tier
def test_shipped_paper_values():
    mlp = OmegaConf.load(TUNED / "heteroscedastic" / "mlp.yaml")
    assert mlp.lr == 0.04016791033073118 and mlp.batch_size == 64
    for space in ("mlp", "bnn_vi", "mfvi", "hmc"):
        shipped = OmegaConf.load(TUNED / "heteroscedastic" / f"{space}.yaml")
        params = OmegaConf.to_container(compose_tune([f"space={space}"]).params)
        fields = to_fields(params, {name: 1.0 for name in params})
        assert set(shipped) == set(fields), space
    for dataset in UCI_DATASETS:
        assert set(OmegaConf.load(TUNED / "uci" / f"mlp_{dataset}.yaml")) == {"lr", "batch_size"}


@pytest.mark.second_tier
@pytest.mark.parametrize("args, expected", [
    ([], "error: space is required; choose one of: bnn_vi, hmc, mfvi, mlp"),
    (["space=nope"], "error: space='nope' is not valid; choose one of: bnn_vi, hmc, mfvi, mlp"),
    (["space=mlp", "trials=0"], "error: trials=0 is not valid; it must be an integer >= 1"),
    (["space=mlp", "bogus=1"], "error: bogus is not a key of the tuning config; choose one of:"),
])
def test_bad_input_is_one_line_with_exit_code_2(args, expected, tmp_path):
    result = run_cli(args, tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), result.stderr
    assert not list(tmp_path.iterdir()), "bad input must not create storage"


@pytest.mark.second_tier
def test_command_line_runs_and_exports(tmp_path):
    out = tmp_path / "mlp.yaml"
    args = ["space=mlp", "objective.target=tests.unit.tuning.test_tune.quadratic", "trials=2",
            "threads=0", f"export={out}"]
    result = run_cli(args, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "2/2 trials finished" in result.stdout
    assert (tmp_path / "tuning" / "mlp.db").exists()
    assert set(yaml.safe_load(out.read_text())) == {"lr", "batch_size"}


@pytest.mark.second_tier
def test_mlp_objective_runs_for_real(tmp_path):
    from bench.tuning.objectives import mlp_objective

    storage = tmp_path / "mlp.db"
    summary = tune(compose_tune(["space=mlp", "trials=2", "objective.max_epochs=3",
                                 f"storage={storage}", "threads=0"]))
    assert summary["counts"]["complete"] == 2
    assert all(math.isfinite(t.value) for t in trials_of(storage))
    params = {"lr": 0.01, "batch_size": 64}
    assert mlp_objective(params, 42, max_epochs=3) == mlp_objective(params, 42, max_epochs=3)


def test_scales_read_tuned_values_from_their_source(tmp_path):
    from hydra import compose, initialize_config_dir

    from bench.harness.tuned import load_tuned
    from bench.jobs.regression_runner import build_method

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cpu = compose("config", overrides=["experiment=ssla/table-2", "scale=cpu", "method=vi"])
        paper = compose("config", overrides=["experiment=ssla/table-2", "scale=paper"])
    shipped = yaml.safe_load((TUNED / "heteroscedastic" / "mlp.yaml").read_text())
    assert cpu.base.lr == shipped["lr"] and cpu.base.batch_size == shipped["batch_size"]
    alpha = yaml.safe_load((TUNED / "heteroscedastic" / "bnn_vi.yaml").read_text())["alpha"]
    assert build_method(cpu, {}).alpha == alpha
    with pytest.raises(Exception, match="make tune-heteroscedastic SCALE=paper"):
        OmegaConf.to_container(paper.base, resolve=True)
    (tmp_path / "tuned" / "retuned" / "toy").mkdir(parents=True)
    (tmp_path / "tuned" / "retuned" / "toy" / "mlp.yaml").write_text("lr: 0.5\n")
    assert load_tuned("retuned", "toy/mlp", tmp_path).lr == 0.5
    with pytest.raises(ConfigError, match="scale.tuned_source='cpu'"):
        load_tuned("cpu", "toy/mlp", tmp_path)


@pytest.mark.slow
def test_two_workers_share_one_study_and_stop_at_its_total(tmp_path):
    storage = tmp_path / "shared.log"
    args = ["space=mlp", "objective.target=tests.unit.tuning.test_tune.quadratic", "trials=8",
            "threads=0", f"storage={storage}"]
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    workers = [subprocess.Popen([sys.executable, "-m", "bench.tune", *args, f"worker={w}"],
                                cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for w in (0, 1)]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), outputs
    states = [t.state for t in trials_of(storage)]
    finished = [s for s in states if s != optuna.trial.TrialState.RUNNING]
    assert 8 <= len(finished) <= 9 and len(finished) == len(states)
