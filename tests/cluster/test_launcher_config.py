"""The Slurm launcher configs: requests from the environment, one submitit folder per
submission. Composition only; no Slurm needed."""

from __future__ import annotations

import time

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from bench.harness.overrides import CONF_DIR

SIZING = {"BENCH_SLURM_CPUS": ("cpus_per_task", 1, 3),
          "BENCH_SLURM_MEM_GB": ("mem_gb", 4, 12),
          "BENCH_SLURM_TIMEOUT_MIN": ("timeout_min", 240, 30),
          "BENCH_SLURM_REQUEUES": ("max_num_timeout", 3, 5),
          "BENCH_SLURM_SIGNAL_DELAY_S": ("signal_delay_s", 120, 30),
          "BENCH_SLURM_ARRAY_PARALLELISM": ("array_parallelism", 64, 8)}
SITE = {"BENCH_SLURM_PARTITION": "partition", "BENCH_SLURM_ACCOUNT": "account",
        "BENCH_SLURM_QOS": "qos"}


def launcher(choice: str = "slurm", overrides: tuple[str, ...] = ()) -> dict:
    """The resolved ``hydra.launcher`` node of ``hydra/launcher=<choice>``."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra/launcher={choice}", "results_dir=/r",
                                           *overrides], return_hydra_config=True)
    GlobalHydra.instance().clear()
    return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)


@pytest.fixture(autouse=True)
def no_site_settings(monkeypatch):
    for name in [*SIZING, *SITE, "BENCH_SLURM_GPUS"]:
        monkeypatch.delenv(name, raising=False)


def test_defaults_fit_a_small_node_and_requeue_on_time_out():
    node = launcher()
    for key, default, _ in SIZING.values():
        assert node[key] == default, key
    assert node["gpus_per_node"] == 0 and node["tasks_per_node"] == 1
    assert all(node[key] is None for key in SITE.values())


@pytest.mark.parametrize("variable", sorted(SIZING))
@pytest.mark.second_tier
def test_each_request_comes_from_its_environment_variable(variable, monkeypatch):
    key, _, value = SIZING[variable]
    monkeypatch.setenv(variable, str(value))
    node = launcher()
    assert node[key] == value and isinstance(node[key], int)


@pytest.mark.parametrize("variable", sorted(SITE))
@pytest.mark.second_tier
def test_site_settings_come_from_the_environment_and_empty_means_unset(variable, monkeypatch):
    monkeypatch.setenv(variable, "site-value")
    assert launcher()[SITE[variable]] == "site-value"
    monkeypatch.setenv(variable, "")
    assert launcher()[SITE[variable]] is None


def test_an_override_beats_the_environment(monkeypatch):
    monkeypatch.setenv("BENCH_SLURM_CPUS", "3")
    assert launcher(overrides=("hydra.launcher.cpus_per_task=2",))["cpus_per_task"] == 2


def test_gpu_launcher_asks_for_one_gpu_unless_told(monkeypatch):
    assert launcher("slurm_gpu")["gpus_per_node"] == 1
    assert launcher("slurm")["gpus_per_node"] == 0
    monkeypatch.setenv("BENCH_SLURM_GPUS", "4")
    assert launcher("slurm_gpu")["gpus_per_node"] == 4


def test_jobs_use_as_many_threads_as_cpus_they_were_given():
    [line] = launcher()["setup"]
    assert line == 'test -n "$OMP_NUM_THREADS" || export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK'


def test_each_submission_gets_its_own_submitit_folder_under_the_sweep_folder():
    first = launcher()["submitit_folder"]
    time.sleep(0.01)
    second = launcher()["submitit_folder"]
    assert first != second
    for folder in (first, second):
        assert folder.startswith("/r/.hydra/multirun/.submitit/") and folder.endswith("/%j")
        stamp = folder.split("/")[-2]
        assert len(stamp) == len("2026-01-01_00-00-00-000000") and stamp[:2] == "20"
