"""Bad command-line values stop with one line naming the key, before any task runs."""

from __future__ import annotations

import re

import pytest

from bench.harness.errors import ConfigError
from bench.harness.overrides import check_overrides, drop_empty_results_dir, env_or_default

BASE = ["experiment=ssla/table-1", "scale=smoke"]


@pytest.mark.parametrize(("override", "message"), [
    ("seed=abc", "seed='abc' is not valid; it must be an integer"),
    ("seed=", "seed='' is not valid; it must be an integer"),
    ("seed=1.5", "seed=1.5 is not valid; it must be an integer"),
    ("seed=1,2.5", "seed=2.5 is not valid; it must be an integer"),
    ("task.n=1.5", "task.n=1.5 is not valid; it must be an integer"),
    ("rerun_failed=no", "rerun_failed='no' is not valid; choose one of: true, false"),
    ("verbose=1", "verbose=1 is not valid; choose one of: true, false"),
    ("task.nn=5", "task.nn: no such config key; valid keys under task: _target_, dtype, n"),
    ("methodd=ssla", "methodd: no such config key; valid keys at the top level: artifact,"),
])
@pytest.mark.second_tier
def test_bad_value_or_key_is_one_line_naming_it(override, message):
    with pytest.raises(ConfigError) as caught:
        check_overrides([*BASE, override])
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_interpolated_integer_key_is_checked_against_its_resolved_default():
    with pytest.raises(ConfigError, match="tune_steps=2.5 is not valid; it must be an integer"):
        check_overrides(["experiment=ssla/table-2", "method=la", "method.tune_steps=2.5"])


@pytest.mark.parametrize("override", ["seed=7", "seed=1,2", "rerun_failed=true",
                                      "protocol.dtype=float64", "+extra_key=1"])
@pytest.mark.second_tier
def test_good_values_pass(override):
    check_overrides([*BASE, override])


def test_empty_results_dir_means_the_default(monkeypatch):
    assert drop_empty_results_dir(["seed=1", "results_dir=", "results_dir=''"]) == ["seed=1"]
    monkeypatch.setenv("BENCH_RESULTS_DIR", "  ")
    assert env_or_default("BENCH_RESULTS_DIR", "results") == "results"
    monkeypatch.setenv("BENCH_RESULTS_DIR", "/scratch/r")
    assert env_or_default("BENCH_RESULTS_DIR", "results") == "/scratch/r"


@pytest.mark.parametrize(("override", "message"), [
    ("dataset.prior_vars=[0,-1]", "dataset.prior_vars[*]=0 is not valid; it must be a positive"),
    ("dataset.sigma=0", "dataset.sigma=0 is not valid; it must be a positive number"),
])
def test_dataset_checks_run_before_the_task(override, message, tmp_path):
    from bench.harness.job_execution import run_job
    from tests.helpers import compose_config

    overrides = ["experiment=ssla/table-7", "scale=smoke", f"results_dir={tmp_path}", override]
    with pytest.raises(ConfigError, match=re.escape(message)):
        run_job(compose_config(overrides), overrides)
    assert not list(tmp_path.rglob("record.json"))


@pytest.mark.parametrize(("overrides", "message"), [
    (["experiment=ssla/figure-1", "method=la"],
     "method='la' does not fit experiment ssla/figure-1: it is not a ConjugateMethod (its fit "
     "takes RegressionSplits, not ConjugateProblem); choose one of: assla, ssla, ssla_assla"),
    (["experiment=ssla/table-2", "method=ssla"],
     "method='ssla' does not fit experiment ssla/table-2: it is not a RegressionNetworkMethod "
     "(its fit takes ConjugateProblem, not RegressionSplits); choose one of: deep_ensemble, hmc, "
     "la,"),
    (["experiment=ssla/table-7", "dataset=uci_bike"],
     "dataset='uci_bike' does not fit experiment ssla/table-7: it is not a PriorModularityData; "
     "choose one of: prior_modularity"),
])
@pytest.mark.second_tier
def test_a_method_or_dataset_that_does_not_fit_the_experiment_stops_first(overrides, message,
                                                                           tmp_path):
    from bench.harness.job_execution import run_job
    from tests.helpers import compose_config

    overrides = [*overrides, "scale=smoke", f"results_dir={tmp_path}"]
    with pytest.raises(ConfigError, match=re.escape(message)):
        run_job(compose_config(overrides), overrides)
    assert not list(tmp_path.rglob("record.json"))


def test_an_unwritable_results_dir_is_one_line_before_hydra_starts(tmp_path):
    from bench.harness.overrides import require_writable_results_dir

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="results_dir=.*a-file/records' cannot be written"):
        require_writable_results_dir([f"results_dir={blocker / 'records'}"])
    assert require_writable_results_dir([f"results_dir={tmp_path / 'ok'}"]).is_dir()


def test_unknown_map_recipe_is_one_line_naming_the_recipes():
    with pytest.raises(ConfigError) as caught:
        check_overrides(["experiment=laplace_redux/map-recipe", "map_recipe=adam_b1024"])
    assert str(caught.value) == (
        "map_recipe='adam_b1024' is not valid; choose one of: adam_b128, adam_b512, "
        "adam_lr01_b512, adamw_b512, sgd_nesterov_b512")



TEMPERED = ["experiment=generalized_laplace/figure-3", "scale=smoke"]  # temperatures: [floats]
CONJUGATE = ["experiment=ssla/figure-1", "scale=smoke"]  # dataset.sizes: [integers]


@pytest.mark.parametrize(("base", "override", "message"), [
    (TEMPERED, "temperatures=[abc]", "temperatures[0]='abc' is not valid; it must be a number"),
    (TEMPERED, "temperatures=[0.1,true]", "temperatures[1]=True is not valid; it must be a number"),
    (TEMPERED, "temperatures=[0.1],[1,x]", "temperatures[1]='x' is not valid; it must be a number"),
    (TEMPERED, "temperatures=0.5", "temperatures=0.5 is not valid; it must be a list of numbers"),
    (CONJUGATE, "dataset.sizes=abc",
     "dataset.sizes='abc' is not valid; it must be a list of integers"),
    (CONJUGATE, "dataset.sizes=[20,1.5]",
     "dataset.sizes[1]=1.5 is not valid; it must be an integer"),
])
@pytest.mark.second_tier
def test_list_elements_are_checked_one_by_one(base, override, message):
    with pytest.raises(ConfigError) as caught:
        check_overrides([*base, override])
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("base", "override"), [
    (TEMPERED, "temperatures=[1,0.5,1e3]"),
    (TEMPERED, "temperatures=null"),
    (CONJUGATE, "dataset.sizes=[20,100]"),
])
def test_good_list_values_pass(base, override):
    check_overrides([*base, override])


@pytest.mark.parametrize(("blocker", "mode"), [(".hydra", []), (".hydra/run", []),
                                             (".hydra/multirun", ["-m"])])
def test_a_file_where_hydras_run_folder_belongs_is_one_line_naming_it(blocker, mode, tmp_path,
                                                                       capsys, monkeypatch):
    from tests.helpers import config_error_line

    (tmp_path / blocker).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / blocker).write_text("")
    line = config_error_line([*mode, "experiment=ssla/table-7", "scale=smoke"], tmp_path,
                             capsys, monkeypatch)
    assert f"{tmp_path / blocker} is a file" in line


@pytest.mark.parametrize(("overrides", "message"), [
    (["experiment=ssla/blr", "scale=smoke", "dataset.sigma2=nan"],
     "dataset.sigma2=nan is not valid; it must be a finite number"),
    (["experiment=ssla/blr", "scale=smoke", "dataset.sigma2=inf"],
     "dataset.sigma2=inf is not valid; it must be a finite number"),
    ([*BASE, "seed=99999999999999999999"],
     "seed=99999999999999999999 is not valid; it must lie in the 64-bit integer range"),
    (["experiment=laplace_redux/table-3-side-runs", "scale=smoke", "method=swag"],
     "method=swag is not valid for experiment=laplace_redux/table-3-side-runs: a side run "
     "varies only bayes_by_backprop_kl_sum, cyclical_sghmc_code_counter"),
])
def test_non_finite_out_of_range_and_unvaried_side_run_values_are_one_line(overrides, message):
    with pytest.raises(ConfigError) as caught:
        check_overrides(overrides)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_side_run_takes_the_methods_it_varies():
    check_overrides(["experiment=laplace_redux/table-3-side-runs", "scale=smoke",
                     "method=bayes_by_backprop_kl_sum"])


def test_a_size_that_cannot_fit_in_memory_is_refused_naming_the_key():
    from bench.harness.errors import require_fits_in_memory

    with pytest.raises(ConfigError, match=r"task.n=100000000000000 is not valid here: 4 "
                                          r"float64 arrays of task.n values need about"):
        require_fits_in_memory("task.n", 10**14, 4 * 8 * 10**14,
                               "4 float64 arrays of task.n values")
    assert require_fits_in_memory("task.n", 10, 320, "4 float64 arrays") == 10


def test_a_results_dir_on_a_full_disk_is_refused_before_hydra_writes_there(tmp_path,
                                                                              monkeypatch):
    """A nearly full disk gave a 22-line traceback from Hydra's multirun.yaml write."""
    import shutil
    from collections import namedtuple

    from bench.harness.overrides import require_writable_results_dir

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(65536, 61440, 4096))
    with pytest.raises(ConfigError) as caught:
        require_writable_results_dir([f"results_dir={tmp_path}"])
    assert str(caught.value) == (
        f"results_dir={str(tmp_path)!r} cannot be written (only 4 KiB free on its disk, fewer "
        "than the 1024 KiB a run needs for its records and Hydra's files); set results_dir= "
        "or BENCH_RESULTS_DIR to a writable folder")
    assert not (tmp_path / ".hydra").exists()
