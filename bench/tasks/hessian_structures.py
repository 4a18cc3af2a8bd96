"""Hessian structures of a network trained by online marginal likelihood: Laplace Redux Table 2.

One job = (structure, training seed): the method node (``online_marglik_diag``,
``online_marglik_kron`` or ``online_marglik_full``) trains its network and prior precision
from scratch on the in-distribution training set and fits its Laplace approximation, through
:func:`~bench.jobs.classification_runner.prepare_job` (fit and per-set prediction timed);
its predictive is scored on the in-distribution test part (Fashion-MNIST: the 8k of the 2k/8k
split) and each OOD test set present.

Cells, row = the method node's name (``LA/DIAG``, ``LA/KFAC``, ``LA/FULL``) followed by the
experiment's ``row_suffix`` when it sets one (a side run's rows, e.g. ``LA/DIAG (100 epochs,
5k refits)``), fractions and nats as the paper prints them:

* ``test_loglik``: mean log predictive probability of the test labels (= -NLL);
* ``test_acc``: accuracy on the test part;
* ``ood_auroc_avg``: the mean over the OOD sets present of the AUROC (in-distribution
  positive, score = largest probability); ``auroc_<set>`` each one;
* ``pred_time``: mean over the input sets (test part and OOD sets) of the seconds the
  predictive takes on the whole set, as the paper averages its four sets.

An optional OOD set whose files are absent (``dataset.optional_ood``: EMNIST-digits) is
skipped: ``fitted.ood_needs_data`` names its files, ``fitted.ood_sets`` the sets averaged.
"""

from __future__ import annotations

from omegaconf import DictConfig
from torch import Tensor

from bench.contracts.capabilities import OnlineMarglik
from bench.datasets.image_classification import ImageClassificationData
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.jobs.classification_runner import (
    ClassificationJob,
    VariantPredictions,
    ood_scores,
    predict_variants,
    prepare_job,
    record_health,
    short_name,
    test_and_ood_sets,
)


def structure_cells(result: TaskResult, row: str, scores: dict[str, float],
                    ood_sets: tuple[str, ...], seconds: dict[str, float]) -> None:
    """Add one row's cells (module docstring) from ``classification_metrics`` output and the
    prediction seconds per input set."""
    result.add(row, "test_loglik", -scores["nll"])
    result.add(row, "test_acc", scores["accuracy"])
    aurocs = [scores[f"{name}_auroc"] for name in ood_sets]
    for name, value in zip(ood_sets, aurocs, strict=True):
        result.add(row, f"auroc_{short_name(name)}", value)
    if aurocs:
        result.add(row, "ood_auroc_avg", sum(aurocs) / len(aurocs))
    result.add(row, "pred_time", sum(seconds.values()) / len(seconds))


def input_sets(cfg: DictConfig, job: ClassificationJob) -> dict[str, Tensor]:
    """The test part and the OOD sets present, their sizes in ``fitted.set_sizes``."""
    sets = test_and_ood_sets(cfg, job)
    job.result.fitted["set_sizes"] = {name: len(x) for name, x in sets.items()}
    return sets


def variant_cells(cfg: DictConfig, job: ClassificationJob, variant: VariantPredictions) -> None:
    """The variant's row (before ``cfg.row_suffix``): cells, per-set prediction times and the
    in-distribution NLL, Brier, ECE and confidence as metrics."""
    scores = ood_scores(cfg, job, variant)
    row = variant.row + str(cfg.get("row_suffix") or "")
    structure_cells(job.result, row, scores, job.data.available_ood, variant.predict_seconds)
    job.result.timings.update({f"{row}/predict_s/{name}": s
                               for name, s in variant.predict_seconds.items()})
    job.result.metrics.update({f"{row}/{key}": value for key, value in scores.items()
                               if key in ("nll", "brier", "ece", "confidence")})


@takes(datasets=(ImageClassificationData,), methods=(OnlineMarglik,))
def run(cfg: DictConfig) -> TaskResult:
    """Train the structure's network and prior by online marginal likelihood, fit its Laplace
    approximation and score it on the test part and the OOD sets."""
    job = prepare_job(cfg)
    sets = input_sets(cfg, job)
    for variant in predict_variants(cfg, job, sets):
        variant_cells(cfg, job, variant)
        record_health(job, variant)
    return job.result
