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

from collections.abc import Mapping

import torch
from omegaconf import DictConfig
from torch import Tensor

from bench.contracts.capabilities import TemperedPredictive
from bench.curvature.kfac_scaling import ExactAccumulation
from bench.datasets.image_classification import ImageClassificationData
from bench.harness.errors import require_positive
from bench.harness.fitted_variants import built_variants
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.task_inputs import capability, takes
from bench.harness.timing import Stopwatch
from bench.jobs.classification_runner import (
    ClassificationJob,
    VariantPredictions,
    prepare_job,
    record_health,
)
from bench.metrics.classification_scores import accuracy, classification_metrics
from bench.predictive.categorical import Categorical

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
    if cfg.get("posterior") is None:
        return capability(instantiate_method(cfg.method), TemperedPredictive)
    ((_, method),) = built_variants(cfg.method, cfg.posterior, TemperedPredictive)
    return method


def job_temperatures(cfg: DictConfig) -> list[float]:
    """The experiment's temperatures, each positive (a one-line ConfigError otherwise)."""
    return [require_positive("temperatures", float(t)) for t in cfg.temperatures]


def test_and_all_ood_sets(cfg: DictConfig, job: ClassificationJob) -> dict[str, Tensor]:
    """The in-distribution test part (under the data set's name) and every OOD set."""
    data = job.data
    return {data.images: job.splits.x_test,
            **{name: data.ood_set(name, job.seed).x for name in data.ood}}


def map_test_accuracy(job: ClassificationJob) -> float:
    """Test accuracy of the stored MAP network's own softmax."""
    with torch.no_grad():
        predictive = Categorical.from_logits(job.network.module(job.splits.x_test))
    return accuracy(predictive, job.splits.y_test)


def norm_cells(result: TaskResult, row: str, diagnostics: dict, job: ClassificationJob
               ) -> None:
    """The curvature norms of the row (cells and metrics); the exact K-FAC job at the main
    prior precision adds the paper's text cell."""
    for column in NORM_COLUMNS:
        result.metrics[column] = float(diagnostics[column])
        result.add(row, column, result.metrics[column])
    if row == STRUCTURE_ROWS["kfac"]:  # exact K-FAC at the main prior precision
        model, images = (PAPER_NAMES.get(n, n) for n in (job.recipe.model, job.data.images))
        result.add(f"{model}/{images} KFAC (last layer)", "hessian_frobenius_norm",
                   result.metrics["last_layer_frobenius_norm"])


def tempered_posterior(cfg: DictConfig, job: ClassificationJob, sets: Mapping[str, Tensor]
                       ) -> list[VariantPredictions]:
    """Fit the job's structure on the stored MAP network (``fit_s``), then predict every
    input set at every temperature from one set of draws (``predict_s``)."""
    temperatures = job_temperatures(cfg)
    result = job.result
    result.metrics["map_test_accuracy"] = map_test_accuracy(job)
    method = job_method(cfg)
    watch = Stopwatch()
    diagnostics = method.fit(job.training, job.seed, base=job.network.module)
    result.timings["fit_s"] = watch.elapsed()
    result.fitted.update(diagnostics)
    main = float(cfg.get("main_prior_precision", method.prior_precision))
    row = structure_row(method.structure, method.prior_precision, main, method.accumulation)
    norm_cells(result, row, diagnostics, job)
    watch = Stopwatch()
    by_set = {name: method.predict_tempered(x, temperatures) for name, x in sets.items()}
    result.timings["predict_s"] = watch.elapsed()
    result.arrays["temperatures"] = temperatures
    result.arrays[f"{row}/prior_dominated_share"] = [
        method.prior_dominated_share(temperature) for temperature in temperatures]
    by_temperature = {t: {name: by_t[t] for name, by_t in by_set.items()}
                      for t in temperatures}
    return [VariantPredictions(row, {}, diagnostics, by_temperature=by_temperature)]


def temperature_cells(cfg: DictConfig, job: ClassificationJob, variant: VariantPredictions
                      ) -> None:
    """Cells ``<set>/<metric>@T=<T>`` and curves ``<row>/<set>/<metric>`` (module
    docstring)."""
    result, data, row = job.result, job.data, variant.row
    curves: dict[str, list[float]] = {}
    for temperature, predictives in variant.by_temperature.items():
        scores = classification_metrics(
            predictives[data.images], job.splits.y_test,
            {name: predictives[name] for name in data.ood},
            n_bins=int(cfg.metrics.n_bins), calibration=str(cfg.metrics.calibration),
            ood_score=str(cfg.metrics.ood_score))
        named = {(data.images, m): scores[m] for m in IN_DISTRIBUTION_METRICS}
        named |= {(ood, m): scores[f"{ood}_{m}"] for ood in data.ood for m in OOD_METRICS}
        for (data_set, metric), value in named.items():
            result.add(row, temperature_column(data_set, metric, temperature), value)
            curves.setdefault(f"{row}/{data_set}/{metric}", []).append(float(value))
    result.arrays.update(curves)


@takes(datasets=(ImageClassificationData,), methods=(TemperedPredictive,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit one structure on the stored MAP network, then evaluate every temperature."""
    job_temperatures(cfg)  # checked before the network is trained
    job = prepare_job(cfg)
    sets = test_and_all_ood_sets(cfg, job)
    for variant in tempered_posterior(cfg, job, sets):
        temperature_cells(cfg, job, variant)
        record_health(job, variant)
    return job.result
