"""The steps of classification tasks: data, stored MAP network, fitted variants, scores.

A task runs :func:`prepare_job` -> its input sets (e.g. :func:`test_and_ood_sets`: the
in-distribution test part and each OOD set present) -> :func:`predict_variants` (or a predict
step of its own) -> its cells of each variant (scores from :func:`ood_scores` or
:func:`~bench.metrics.classification_scores.shift_metrics`) and :func:`record_health`.

One job = (method node, model seed). :func:`prepare_job` loads the dataset node and its splits,
gets the MAP network of the experiment's ``network`` recipe for the seed from the trained-
network store (trained once, then reused by every method and every experiment naming the same
recipe; an experiment without ``network``, whose methods all train their own, has none) and
builds the :class:`~bench.datasets.training_set.TrainingSet` the methods fit on.
:func:`predict_variants` fits every variant (table row) of the method node, timed, and
predicts on the input sets a task names, timed; on the same inputs, right after, it times the
MAP network's own softmax (:class:`~bench.methods.baselines.map_classifier.MapClassifier`), so
each record holds ``<row>/predict_s`` and ``<row>/map_predict_s`` measured side by side (the
prediction-time ratios LA/MAP and DE/MAP of Laplace Redux); each variant also keeps its
seconds per input set.

Per-method settings at a scale (fewer epochs, samples) live in the experiment's
``method_settings``: method node ``name`` -> arguments over the node's values, so one
experiment can sweep the whole method group while each method gets its own scaled-down keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from bench.datasets.image_classification import ImageClassificationData, ImageSplits
from bench.datasets.training_set import TrainingSet
from bench.harness.fitted_variants import fitted_variants
from bench.harness.method_nodes import merged_method_node
from bench.harness.result import TaskResult
from bench.harness.timing import Stopwatch
from bench.methods.baselines.map_classifier import MapClassifier
from bench.metrics.classification_scores import accuracy, classification_metrics
from bench.metrics.fit_health import assess, classifier_checks
from bench.predictive.categorical import Categorical
from bench.training.image_recipe import initial_weights, network_recipe
from bench.training.network_store import StoredNetwork, TrainingRecipe, trained_network

# What the paper tables call the data sets (Laplace Redux Tables 3 and 4).
SHORT_NAMES = {"mnist": "mnist", "fashion_mnist": "fmnist", "kmnist": "kmnist",
               "emnist_digits": "emnist", "emnist_digits_torchvision": "emnist",
               "cifar10": "cifar10", "cifar100": "cifar100", "svhn": "svhn"}


def short_name(data_set: str) -> str:
    """The paper's short name of a data set (``fashion_mnist`` -> ``fmnist``)."""
    return SHORT_NAMES.get(data_set, data_set)


@dataclass
class ClassificationJob:
    """What every method of one job shares: the data node, its splits for the seed, the stored
    MAP network, the training set the methods fit on and the record being filled."""

    data: ImageClassificationData
    splits: ImageSplits
    network: StoredNetwork | None
    training: TrainingSet
    seed: int
    result: TaskResult = field(default_factory=TaskResult)
    recipe: TrainingRecipe | None = None
    # Labels of the named input sets where a task needs them (a shifted test set's, say).
    labels: dict[str, Tensor] = field(default_factory=dict)


@dataclass
class VariantPredictions:
    """One fitted variant (table row): its predictive on each named input set, its fit
    diagnostics and its prediction seconds per input set."""

    row: str
    predictives: dict[str, Categorical]
    diagnostics: dict[str, Any]
    predict_seconds: dict[str, float] = field(default_factory=dict)
    # A tempered posterior's predictives: temperature -> input set -> predictive.
    by_temperature: dict[float, dict[str, Categorical]] = field(default_factory=dict)


def prepare_job(cfg: DictConfig) -> ClassificationJob:
    """Dataset node, splits of ``cfg.seed``, the stored MAP network of ``cfg.network`` for the
    seed (timed as ``network_s``; None when the experiment has no ``network``) and the
    training set (name, preprocessing, results folder, device)."""
    data: ImageClassificationData = instantiate(cfg.dataset)
    seed = int(cfg.seed)
    splits = data.splits(seed)
    result, stored, recipe = TaskResult(), None, None
    if cfg.get("network") is not None:
        recipe = network_recipe(cfg.network, data, len(splits.x_train))
        watch = Stopwatch()
        stored = trained_network(recipe, seed, splits.x_train, splits.y_train, cfg.results_dir,
                                 cfg.device)
        result.timings["network_s"] = watch.elapsed()
        result.fitted.update({"recipe_hash": stored.recipe_hash,
                              "network_reused": stored.reused,
                              "network_path": str(stored.path),
                              "initial_weights": initial_weights(recipe)})
    training = TrainingSet(splits.x_train, splits.y_train, data.images, data.normalisation,
                           str(cfg.results_dir), str(cfg.device), data.augmentation)
    return ClassificationJob(data, splits, stored, training, seed, result, recipe=recipe)


def configured_method_node(cfg: DictConfig) -> DictConfig:
    """The method node with the experiment's ``method_settings[<method name>]`` merged on."""
    settings = (cfg.get("method_settings") or {}).get(str(cfg.method.name))
    return merged_method_node(cfg.method, settings)


def map_reference(cfg: DictConfig, job: ClassificationJob, method: Any) -> MapClassifier | None:
    """The MAP network's own softmax in the method's prediction batch size: the timing
    reference of a method's predictions (None without a MAP network)."""
    if job.network is None:
        return None
    reference = MapClassifier(prediction=getattr(method, "prediction", MapClassifier.prediction),
                              device=str(cfg.device))
    reference.fit(job.training, job.seed, base=job.network)
    return reference


def predictions_beside_map(method: Any, sets: Mapping[str, Tensor],
                           reference: MapClassifier | None
                           ) -> tuple[dict[str, Any], dict[str, float], float | None]:
    """The method's predictive on each set with its seconds, and the seconds the MAP
    ``reference`` takes on the same inputs right after each (None without one): measured
    side by side."""
    predictives, seconds, map_seconds = {}, {}, 0.0
    for name, inputs in sets.items():
        watch = Stopwatch()
        predictives[name] = method.predict(inputs)
        seconds[name] = watch.elapsed()
        if reference is not None:
            watch = Stopwatch()
            reference.predict(inputs)
            map_seconds += watch.elapsed()
    return predictives, seconds, None if reference is None else map_seconds


def predict_variants(cfg: DictConfig, job: ClassificationJob, sets: Mapping[str, Tensor]
                     ) -> list[VariantPredictions]:
    """Fit every variant of the (configured) method node and predict on each of ``sets``.

    Fills ``job.result``: timings ``<row>/fit_s``, ``<row>/predict_s`` (all sets) and
    ``<row>/map_predict_s`` (the MAP network on the same sets, in the method's prediction
    batch size, right after the method's own predictions) and their sums ``fit_s``,
    ``predict_s``, ``map_predict_s``; ``fitted.methods[<row>]`` the fit diagnostics; metric
    ``map_test_accuracy``. Methods with ``fits_on_base`` receive the stored MAP network.
    Without a MAP network (``job.network`` None) the MAP timings and accuracy are left out.
    """
    node = configured_method_node(cfg)
    result, rows = job.result, []
    fitted: dict[str, Any] = result.fitted.setdefault("methods", {})
    totals = ("fit_s", "predict_s") + (("map_predict_s",) if job.network is not None else ())
    for total in totals:
        result.timings.setdefault(total, 0.0)
    for variant in fitted_variants(node, job.training, job.seed, posterior=cfg.get("posterior"),
                                   base=job.network):
        row, method, diagnostics, fit_s = (variant.row, variant.method, variant.diagnostics,
                                           variant.fit_s)
        predictives, seconds, map_seconds = predictions_beside_map(
            method, sets, map_reference(cfg, job, method))
        result.timings.update({f"{row}/fit_s": fit_s, f"{row}/predict_s": sum(seconds.values())})
        result.timings["fit_s"] += fit_s
        result.timings["predict_s"] += sum(seconds.values())
        if map_seconds is not None:
            result.timings[f"{row}/map_predict_s"] = map_seconds
            result.timings["map_predict_s"] += map_seconds
        fitted[row] = diagnostics
        rows.append(VariantPredictions(row, predictives, diagnostics, seconds))
    if job.network is not None:
        map_test = MapClassifier(device=str(cfg.device))
        map_test.fit(job.training, job.seed, base=job.network)
        result.metrics["map_test_accuracy"] = accuracy(map_test.predict(job.splits.x_test),
                                                       job.splits.y_test)
    return rows


def test_and_ood_sets(cfg: DictConfig, job: ClassificationJob) -> dict[str, Tensor]:
    """The in-distribution test part (under the data set's name) and each OOD test set
    present; ``fitted.ood_needs_data`` names the files of the absent optional ones and
    ``fitted.ood_sets`` the ones used."""
    data = job.data
    ood_sets = data.available_ood
    sets = {data.images: job.splits.x_test,
            **{name: data.ood_set(name, job.seed).x for name in ood_sets}}
    job.result.fitted["ood_needs_data"] = data.missing_ood()
    job.result.fitted["ood_sets"] = list(ood_sets)
    return sets


def ood_scores(cfg: DictConfig, job: ClassificationJob, variant: VariantPredictions
               ) -> dict[str, float]:
    """:func:`~bench.metrics.classification_scores.classification_metrics` of a variant on the
    in-distribution test part and the OOD sets present (``cfg.metrics`` settings)."""
    data = job.data
    ood = {name: variant.predictives[name] for name in data.available_ood}
    return classification_metrics(
        variant.predictives[data.images], job.splits.y_test, ood,
        n_bins=int(cfg.metrics.n_bins), calibration=str(cfg.metrics.calibration),
        ood_score=str(cfg.metrics.ood_score))


def record_health(job: ClassificationJob, variant: VariantPredictions,
                  test_set: str | None = None) -> None:
    """The variant's health (:func:`bench.metrics.fit_health.classifier_checks`) into
    ``job.result.health[variant.row]``, on the in-distribution test part or the input set
    ``test_set`` (its labels in ``job.labels``, else the test labels), when the variant
    predicted on it."""
    name = job.data.images if test_set is None else test_set
    predictive = variant.predictives.get(name)
    if predictive is not None:
        labels = job.labels.get(name, job.splits.y_test)
        job.result.health[variant.row] = assess(classifier_checks(predictive, labels))
