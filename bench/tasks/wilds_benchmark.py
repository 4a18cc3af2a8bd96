"""WILDS distribution shift (Laplace Redux Figure 10): one method on one benchmark's released
checkpoints of one model seed, scored in distribution and out of distribution.

One job = (dataset node, method node, model seed). The dataset node
(:class:`~bench.datasets.wilds.WildsData`) gives the seed's split roles and checkpoints; the
method (MAP, TS, DE, LA) fits on them (:mod:`bench.methods.baselines.checkpoint_methods`,
:mod:`bench.methods.laplace.last_layer_checkpoint`) and predicts on the ID test split
(``id``) and the OOD test split (``ood``). Cells: row ``<data set>/<method>`` (e.g.
``camelyon17/LA``), column ``<id|ood>/<metric>``:

* classification: ``accuracy``, ``confidence``, ``nll``, ``ece`` and ``mce`` (100 equal bins,
  every point), ``ece_paper`` (the Laplace Redux code's bins, which drop confidences >= 0.99;
  no cell when that leaves no point) and ``brier`` (sum over classes), all fractions;
* regression (PovertyMap): ``mse``, ``nll`` (Gaussian) and ``calibration`` (Kuleshov et al.,
  10 levels, :func:`~bench.metrics.regression.regression_calibration_error`).

A method that does not apply (temperature scaling on PovertyMap, which the paper does not
report) leaves an ok record without cells that says so (``fitted.not_applicable``). Missing
checkpoint files stop the job before any work (one line, exit code 2).
"""

from __future__ import annotations

import math

from hydra.utils import instantiate
from omegaconf import DictConfig

from bench.contracts.method import CheckpointMethod
from bench.datasets.wilds import WildsData
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.task_inputs import capability, takes
from bench.harness.timing import Stopwatch
from bench.jobs.classification_runner import configured_method_node
from bench.metrics import regression as regression_metrics
from bench.metrics.classification_scores import shift_metrics

SPLIT_LABELS = {"id_test": "id", "ood_test": "ood"}
# ece_paper is NaN when every confidence is >= 0.99: no cell then.
NAN_MEANS_NO_CELL = ("ece_paper",)


def not_applicable(method: CheckpointMethod, data: WildsData) -> str | None:
    """Why the method does not apply to the data set's prediction task (None if it does)."""
    if data.task in method.tasks:
        return None
    return f"{method.name} is for {', '.join(method.tasks)}; {data.name} is {data.task}"


def regression_scores(predictive, targets, n_levels: int) -> dict[str, float]:
    """MSE, Gaussian NLL and the regression calibration error."""
    return {"mse": regression_metrics.mse(predictive, targets),
            "nll": regression_metrics.nll(predictive, targets),
            "calibration": regression_metrics.regression_calibration_error(
                predictive, targets, n_levels)}


def split_scores(cfg: DictConfig, data: WildsData, predictive, targets) -> dict[str, float]:
    """A split's metrics: the regression ones on PovertyMap, the shift ones otherwise."""
    if data.task == "regression":
        return regression_scores(predictive, targets, int(cfg.calibration_levels))
    return shift_metrics(predictive, targets, int(cfg.metrics.n_bins))


@takes(datasets=(WildsData,), methods=(CheckpointMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit the method on the seed's checkpoints (the files it reads checked before any work;
    ``fit_s``, its diagnostics as ``fitted.method``); score the ID and OOD test splits
    (``<label>/predict_s``)."""
    data: WildsData = instantiate(cfg.dataset)
    seed = int(cfg.seed)
    job = data.for_seed(seed)
    method = capability(instantiate_method(configured_method_node(cfg)), CheckpointMethod)
    result = TaskResult()
    reason = not_applicable(method, data)
    if reason is not None:
        result.fitted["not_applicable"] = reason
        return result
    keys = method.checkpoint_keys(job)
    job.require_checkpoints(keys)
    result.fitted.update(job.provenance(keys))
    watch = Stopwatch()
    result.fitted["method"] = method.fit(job, seed)
    result.timings["fit_s"] = watch.elapsed()
    row = f"{data.wilds_name}/{method.name}"
    for role, label in SPLIT_LABELS.items():
        watch = Stopwatch()
        predictive = method.predict(job.loader(role))
        result.timings[f"{label}/predict_s"] = watch.elapsed()
        for metric, value in split_scores(cfg, data, predictive, job.targets(role)).items():
            if math.isfinite(value) or metric not in NAN_MEANS_NO_CELL:
                result.add(row, f"{label}/{metric}", value)
    return result
