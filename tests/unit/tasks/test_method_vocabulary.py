"""Tasks name methods by protocol (a data family or a capability of ``bench.contracts``), not
by class: the method options each task takes, the one-line error, and the layering."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hydra.utils import get_method

from bench.contracts.capabilities import StoredTensors, TemperedPredictive
from bench.contracts.method import ConjugateMethod, RegressionNetworkMethod
from bench.harness.errors import ConfigError
from bench.harness.task_inputs import capability, fitting_options, protocol_gap
from bench.methods.baselines.map_classifier import MapClassifier
from bench.methods.laplace.laplace_torch import LaplaceTorchMethod
from bench.methods.laplace.tempered import TemperedLaplace
from bench.methods.ssla.conjugate_ssla import SSLAMethod
from tests.helpers import REPO

METHODS = REPO / "conf" / "method"

# The method options each task took when it listed classes (plus the memory task, which now
# asks for StoredTensors instead of failing inside a job without it, the image classification
# tasks, which ask for a ClassifierMethod instead of taking any method, and MC dropout, the
# method added to show the leaderboard).
CLASSIFIERS = ["bayes_by_backprop", "bayes_by_backprop_kl_sum", "classifier_ensemble",
               "continual_laplace", "cyclical_sghmc", "cyclical_sghmc_code_counter",
               "ggn_posteriors", "laplace_classifier", "laplace_ggn", "map_classifier",
               "online_marglik_diag", "online_marglik_full", "online_marglik_kron", "swag"]
TASK_METHODS = {
    "conjugate.grid_ppd": ["assla", "ssla", "ssla_assla"],
    "prior_modularity.run": ["assla", "ssla", "ssla_assla"],
    "sine_rbf.run": ["assla", "ssla", "ssla_assla"],
    "float_precision.run": ["assla"],
    "continual_learning.run": ["continual_laplace"],
    "ggn_model_selection.run": ["laplace_ggn"],
    "ggn_predictives.run": ["ggn_posteriors", "laplace_ggn"],
    "gp_explanations.run": ["ggn_gp_view"],
    "hessian_structures.run": ["online_marglik_kron"],
    "nn_regression.run": ["deep_ensemble", "hmc", "la", "mc_dropout", "mfvi", "nn_assla",
                          "nn_ssla", "plugin", "vi"],
    "structure_uncertainty.run": ["tempered_laplace"],
    "tempered_classification.run": ["tempered_laplace"],
    "subnetwork_coverage.run": ["subnet_laplace"],
    "subnetwork_wasserstein.run": ["subnet_laplace"],
    "wilds_benchmark.run": ["wilds_ensemble", "wilds_laplace", "wilds_map",
                            "wilds_temperature_scaling"],
    "method_memory.run": ["bayes_by_backprop", "classifier_ensemble", "cyclical_sghmc",
                          "laplace_classifier", "map_classifier", "online_marglik_kron", "swag"],
}


@pytest.mark.parametrize(("task", "options"), sorted(TASK_METHODS.items()))
@pytest.mark.second_tier
def test_each_task_takes_the_method_options_its_protocols_select(task, options):
    methods = get_method(f"bench.tasks.{task}").inputs.methods
    assert all(getattr(kind, "_is_protocol", False) for kind in methods), methods
    assert fitting_options(METHODS, methods) == options


def test_a_family_is_the_data_fit_takes_and_a_capability_its_members():
    assert protocol_gap(LaplaceTorchMethod, RegressionNetworkMethod) is None
    assert protocol_gap(SSLAMethod, RegressionNetworkMethod) == (
        "it is not a RegressionNetworkMethod (its fit takes ConjugateProblem, not "
        "RegressionSplits)")
    assert protocol_gap(MapClassifier, ConjugateMethod) == (
        "it is not a ConjugateMethod (its fit takes TrainingSet, not ConjugateProblem)")
    assert protocol_gap(MapClassifier, StoredTensors) is None
    assert protocol_gap(MapClassifier, TemperedPredictive) == (
        "it is not a TemperedPredictive (no structure, accumulation, prior_precision, "
        "predict_tempered, prior_dominated_share)")
    assert protocol_gap(TemperedLaplace, TemperedPredictive) is None


def test_a_method_without_the_capability_is_one_line():
    assert capability(TemperedLaplace(), TemperedPredictive) is not None
    with pytest.raises(ConfigError, match=r"^method 'MAP' does not fit this task: it is not a "
                                          r"TemperedPredictive \(no structure, accumulation"):
        capability(MapClassifier(), TemperedPredictive)


def imported_modules(folder: Path) -> dict[str, set[str]]:
    """``bench`` modules imported by each .py file under ``folder``."""
    found = {}
    for path in folder.rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[path.relative_to(REPO).as_posix()] = {n for n in names if n.startswith("bench")}
    return found


def test_tasks_import_no_task_and_the_harness_no_method_or_contract():
    for path, modules in imported_modules(REPO / "bench" / "tasks").items():
        assert not [m for m in modules if m.startswith("bench.tasks")], path
    for path, modules in imported_modules(REPO / "bench" / "harness").items():
        assert not [m for m in modules
                    if m.startswith(("bench.methods", "bench.contracts", "bench.jobs",
                                     "bench.tasks"))], path
    for path, modules in imported_modules(REPO / "bench" / "contracts").items():
        assert not [m for m in modules
                    if m.startswith(("bench.methods", "bench.harness", "bench.tasks"))], path
