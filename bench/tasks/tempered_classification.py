"""Accuracy and predictive entropy of a tempered Laplace posterior over many temperatures.

Generalized Laplace paper, Figures 3 and 5a (and 4 / 5b with another dataset and network): a
MAP network from the trained-network store (one per recipe and seed, shared by every structure
and every experiment naming the same recipe), the curvature of one structure computed once,
one fixed set of standard-normal draws reused for every temperature, and the NN-sampling
predictive ``mean_s softmax(f(x; theta_s))`` on the in-distribution test set and on each OOD set
(:class:`bench.methods.laplace.tempered.TemperedLaplace`).

One job = (structure, accumulation, prior precision, seed). Cells: row = structure (Diag,
KFAC, EKFAC; the paper-like accumulation of reproduction notes section 7.6 and a prior
precision other than the experiment's ``main_prior_precision`` are marked in the row, e.g.
``KFAC (paper-like)``, ``Diag (delta=1)``), columns ``<set>/<metric>@T=<T>`` for ``<set>`` the
in-distribution set (``accuracy``, ``entropy``, ``nll``, ``ece``) and every OOD set
(``entropy``, ``auroc``), and the last-layer curvature norms of both accumulations
(:data:`NORM_COLUMNS`, the KFAC-norm hypothesis); the exact K-FAC job at the main prior
precision adds the paper's text cell ``<network>/<data> KFAC (last layer)``,
``hessian_frobenius_norm``. Arrays ``temperatures`` and ``<row>/<set>/<metric>`` hold the
curves for the figures. Metrics: the MAP network's own test accuracy and the two norms.
"""

from __future__ import annotations

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from bench.contracts.capabilities import TemperedPredictive
from bench.curvature.kfac_scaling import ExactAccumulation
from bench.datasets.image_classification import ImageClassificationData
from bench.datasets.training_set import TrainingSet
from bench.harness.errors import require_choice, require_positive
from bench.harness.method_nodes import instantiate_method, method_variants
from bench.harness.result import TaskResult
from bench.harness.task_inputs import capability, takes
from bench.harness.timing import Stopwatch
from bench.metrics.classification import accuracy, classification_metrics
from bench.predictive.categorical import Categorical
from bench.training.image_recipe import initial_weights, network_recipe
from bench.training.network_store import trained_network

STRUCTURE_ROWS = {"diag": "Diag", "kfac": "KFAC", "ekfac": "EKFAC", "bdiag": "B-Diag"}
# How the paper names networks and data sets in its text (the KFAC-norm cell's row).
PAPER_NAMES = {"lenet5": "LeNet-5", "resnet18": "ResNet-18", "mnist": "MNIST",
               "cifar10": "CIFAR-10"}
IN_DISTRIBUTION_METRICS = ("accuracy", "entropy", "nll", "ece")
OOD_METRICS = ("entropy", "auroc")
# Last-layer Frobenius norms of the job's curvature (cells and metrics of every job).
NORM_COLUMNS = ("last_layer_frobenius_norm", "paper_like_last_layer_frobenius_norm")


def temperature_column(data_set: str, metric: str, temperature: float) -> str:
    """Cell column of one metric at one temperature, e.g. ``mnist/entropy@T=0.001``."""
    return f"{data_set}/{metric}@T={temperature:g}"


def structure_row(structure: str, prior_precision: float, main_prior_precision: float,
                  accumulation: str = ExactAccumulation.name) -> str:
    """The structure's paper name; a non-exact accumulation and a sensitivity run at another
    prior precision are marked, e.g. ``KFAC (paper-like)``, ``Diag (delta=1)``,
    ``KFAC (paper-like, delta=1)``."""
    marks = [] if accumulation == ExactAccumulation.name else [accumulation]
    if prior_precision != main_prior_precision:
        marks.append(f"delta={prior_precision:g}")
    row = STRUCTURE_ROWS[structure]
    return f"{row} ({', '.join(marks)})" if marks else row


def job_method(cfg: DictConfig) -> TemperedPredictive:
    """The job's method: the method node, with the arguments of the experiment's
    ``posterior`` (a name of ``method.variants``) where the experiment sweeps posteriors; an
    unknown name is a one-line ConfigError naming the variants."""
    arguments = {}
    if cfg.get("posterior") is not None:
        variants = method_variants(cfg.method)
        arguments = variants[require_choice("posterior", str(cfg.posterior), list(variants))]
    return capability(instantiate_method(cfg.method, **arguments), TemperedPredictive)


@takes(datasets=(ImageClassificationData,), methods=(TemperedPredictive,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit one structure on the stored MAP network, then evaluate every temperature."""
    data: ImageClassificationData = instantiate(cfg.dataset)
    temperatures = [require_positive("temperatures", float(t)) for t in cfg.temperatures]
    seed = int(cfg.seed)
    splits = data.splits(seed)
    recipe = network_recipe(cfg.network, data, len(splits.x_train))
    watch = Stopwatch()
    stored = trained_network(recipe, seed, splits.x_train, splits.y_train, cfg.results_dir,
                             cfg.device)
    result = TaskResult(timings={"network_s": watch.elapsed()})
    with torch.no_grad():
        map_predictive = Categorical.from_logits(stored.module(splits.x_test))
    result.metrics["map_test_accuracy"] = accuracy(map_predictive, splits.y_test)
    result.fitted.update({"recipe_hash": stored.recipe_hash, "network_reused": stored.reused,
                          "network_path": str(stored.path),
                          "initial_weights": initial_weights(recipe)})

    method = job_method(cfg)
    watch = Stopwatch()
    training = TrainingSet(splits.x_train, splits.y_train, data.images, data.normalisation,
                           str(cfg.results_dir), str(cfg.device))
    diagnostics = method.fit(training, seed, base=stored.module)
    result.timings["fit_s"] = watch.elapsed()
    result.fitted.update(diagnostics)
    main = float(cfg.get("main_prior_precision", method.prior_precision))
    row = structure_row(method.structure, method.prior_precision, main, method.accumulation)
    for column in NORM_COLUMNS:
        result.metrics[column] = float(diagnostics[column])
        result.add(row, column, result.metrics[column])
    if row == STRUCTURE_ROWS["kfac"]:  # exact K-FAC at the main prior precision
        model, images = (PAPER_NAMES.get(n, n) for n in (recipe.model, data.images))
        result.add(f"{model}/{images} KFAC (last layer)", "hessian_frobenius_norm",
                   result.metrics["last_layer_frobenius_norm"])

    watch = Stopwatch()
    in_name = data.images
    in_predictives = method.predict_tempered(splits.x_test, temperatures)
    ood_predictives = {name: method.predict_tempered(data.ood_set(name, seed).x, temperatures)
                       for name in data.ood}
    result.timings["predict_s"] = watch.elapsed()
    result.arrays["temperatures"] = temperatures
    curves: dict[str, list[float]] = {}
    for temperature in temperatures:
        scores = classification_metrics(
            in_predictives[temperature], splits.y_test,
            {name: by_t[temperature] for name, by_t in ood_predictives.items()},
            n_bins=int(cfg.metrics.n_bins), calibration=str(cfg.metrics.calibration),
            ood_score=str(cfg.metrics.ood_score))
        named = {(in_name, m): scores[m] for m in IN_DISTRIBUTION_METRICS}
        named |= {(ood, m): scores[f"{ood}_{m}"] for ood in data.ood for m in OOD_METRICS}
        for (data_set, metric), value in named.items():
            result.add(row, temperature_column(data_set, metric, temperature), value)
            curves.setdefault(f"{row}/{data_set}/{metric}", []).append(float(value))
    result.arrays.update(curves)
    result.arrays[f"{row}/prior_dominated_share"] = [
        method.prior_dominated_share(temperature) for temperature in temperatures]
    return result
