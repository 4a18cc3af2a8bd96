"""`make benchmark METHOD=...`: which experiments a method fits (the task's declared
protocols), the reasons for the others, and one-line errors for bad input."""

from __future__ import annotations

import json

import pytest

from bench.cli.benchmark_method_command import (
    fit_of,
    job_seconds_estimate,
    main,
    method_comparisons,
)
from bench.contracts.method import ClassifierMethod
from bench.datasets.regression_splits import RegressionSplits
from bench.datasets.training_set import TrainingSet
from bench.harness.task_inputs import protocol_gap, takes_data
from bench.methods.baselines.map_classifier import MapClassifier
from bench.methods.baselines.mc_dropout import MCDropout
from bench.methods.laplace.classification import LaplaceTorchClassifier
from bench.methods.laplace.la_backends import ClassificationTrainData


@pytest.mark.second_tier
def test_the_method_comparisons_are_the_membership_sweeps_without_side_runs():
    compared = method_comparisons()
    assert {"ssla/table-2", "laplace_redux/table-3", "laplace_redux/figure-9"} <= set(compared)
    assert "laplace_redux/table-3-side-runs" not in compared
    assert "ggn_thesis/figure-5.4" not in compared


def test_a_regression_method_fits_the_regression_table_and_not_the_classification_ones():
    assert fit_of("mc_dropout", "ssla/table-2", "smoke").reason == ""
    reason = fit_of("mc_dropout", "laplace_redux/table-3", "smoke").reason
    assert reason.startswith("it is not a ClassifierMethod (its fit takes RegressionSplits")


def test_a_fit_on_a_protocol_of_data_takes_the_data_that_has_its_members():
    assert takes_data(ClassificationTrainData, TrainingSet)
    assert not takes_data(ClassificationTrainData, RegressionSplits)
    assert protocol_gap(LaplaceTorchClassifier, ClassifierMethod) is None
    assert protocol_gap(MapClassifier, ClassifierMethod) is None
    assert protocol_gap(MCDropout, ClassifierMethod) is not None


def test_an_unknown_method_is_one_line(capsys):
    assert main(["no_such_method", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: method='no_such_method' is not valid; choose one of:")
    assert "\n" not in err


@pytest.mark.second_tier  # composes every method-comparing experiment
def test_a_method_that_fits_no_experiment_is_one_line_with_the_reasons(capsys):
    assert main(["subnet_laplace", "--dry-run", "--scale", "smoke"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: method=subnet_laplace fits no experiment (")
    assert "ssla/table-2: it is not a RegressionNetworkMethod" in err
    assert "\n" not in err


@pytest.mark.second_tier  # composes every method-comparing experiment and its sweeps
def test_the_dry_run_names_the_runs_and_the_skips(capsys):
    assert main(["mc_dropout", "--dry-run", "--scale", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "run  ssla/table-2 (smoke)" in out
    assert "skip laplace_redux/table-3: it is not a ClassifierMethod" in out
    assert "experiment=ssla/table-2 scale=smoke" in out and "method=mc_dropout" in out


def test_the_cost_estimate_reads_the_reports_job_times(tmp_path):
    folder = tmp_path / "ssla"
    folder.mkdir()
    timings = {"jobs": 4, "job_seconds": 40.0,
               "methods": [{"method": "la", "jobs": 2, "job_seconds": 6.0}]}
    (folder / "table-2.summary.json").write_text(json.dumps({"timings": timings}))
    assert job_seconds_estimate("ssla/table-2", "la", tmp_path) == (3.0, "its own timed jobs")
    seconds, why = job_seconds_estimate("ssla/table-2", "mc_dropout", tmp_path)
    assert seconds == pytest.approx(10.0) and "not this method's" in why
    assert job_seconds_estimate("ssla/table-2", "la", tmp_path / "none") is None


def test_a_method_whose_target_cannot_be_loaded_is_one_line(monkeypatch):
    from omegaconf import OmegaConf

    from bench.cli import benchmark_method_command
    from bench.harness.errors import ConfigError

    broken = OmegaConf.create({"name": "ssla/table-2",
                               "task": {"_target_": "bench.tasks.nn_regression.run"},
                               "method": {"_target_": "my_methods.missing.Method"}})
    monkeypatch.setattr(benchmark_method_command, "_check_composes", lambda *_: broken)
    with pytest.raises(ConfigError, match=r"^method=mine: its _target_ cannot be loaded"):
        fit_of("mine", "ssla/table-2", "smoke")
