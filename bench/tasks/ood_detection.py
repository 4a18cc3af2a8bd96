"""Out-of-distribution detection of classification methods: Laplace Redux Tables 3 and 4.

One job = (method node, model seed), through
:func:`~bench.jobs.classification_runner.prepare_job`: every variant of the method node
(``LA`` and ``LA*`` of the Laplace node; one row for the others) fitted on the seed's stored
MAP network or trained from scratch, then its predictive on the in-distribution test part
(MNIST: the 8k of the 2k/8k split) and on each OOD test set of the dataset node.

Cells, row = the variant's row name, fractions (NLL in nats; the report prints accuracy,
confidence, ECE and AUROC in % as the paper does, and ``fitted.cell_units`` marks the record
as written so):
``conf_<set>`` (mean largest probability on the OOD set) and ``auroc_<set>`` (in-distribution
positive, score = largest probability) for each OOD set under the paper's short name
(``fmnist``, ``kmnist``, ``emnist``; ``svhn``, ``cifar100`` on CIFAR-10), plus the
in-distribution ``acc_<in>``, ``conf_<in>``, ``nll_<in>``, ``brier_<in>`` and ``ece_<in>``.
An optional OOD set whose files are absent (``dataset.optional_ood``) is skipped; the record's
``fitted.ood_needs_data`` names its files and folder, and its cells are left out.
A variant with a fitted scalar prior precision (the LA rows: post-hoc marglik) adds it as the
cell ``prior_precision``. An experiment's ``row_prefix`` (e.g. ``"<recipe> / "`` when it
compares MAP recipes) is put before every row name.
"""

from __future__ import annotations

from omegaconf import DictConfig

from bench.contracts.method import ClassifierMethod
from bench.datasets.image_classification import ImageClassificationData
from bench.harness.result import CELL_UNITS, NEUTRAL_CELLS, TaskResult
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

IN_DISTRIBUTION_CELLS = {"acc": "accuracy", "conf": "confidence", "nll": "nll",
                         "brier": "brier", "ece": "ece"}


def ood_cells(result: TaskResult, row: str, scores: dict[str, float], in_set: str,
              ood_sets: tuple[str, ...]) -> None:
    """Add one row's cells from ``classification_metrics`` output (module docstring)."""
    for prefix, metric in IN_DISTRIBUTION_CELLS.items():
        result.add(row, f"{prefix}_{short_name(in_set)}", scores[metric])
    for name in ood_sets:
        result.add(row, f"conf_{short_name(name)}", scores[f"{name}_confidence"])
        result.add(row, f"auroc_{short_name(name)}", scores[f"{name}_auroc"])


def variant_cells(cfg: DictConfig, job: ClassificationJob, variant: VariantPredictions) -> None:
    """The variant's row (after ``cfg.row_prefix``): OOD and in-distribution cells, and the
    fitted scalar prior precision where it has one."""
    row = str(cfg.get("row_prefix") or "") + variant.row
    job.result.fitted[CELL_UNITS] = NEUTRAL_CELLS
    ood_cells(job.result, row, ood_scores(cfg, job, variant), job.data.images,
              job.data.available_ood)
    prior = variant.diagnostics.get("prior_precision")
    if isinstance(prior, float) and variant.diagnostics.get("prior_structure") == "scalar":
        job.result.add(row, "prior_precision", prior)


@takes(datasets=(ImageClassificationData,), methods=(ClassifierMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit the method node's variants on the seed's MAP network; score OOD detection."""
    job = prepare_job(cfg)
    sets = test_and_ood_sets(cfg, job)
    for variant in predict_variants(cfg, job, sets):
        variant_cells(cfg, job, variant)
        record_health(job, variant)
    return job.result
