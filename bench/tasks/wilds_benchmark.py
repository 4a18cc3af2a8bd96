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

from omegaconf import DictConfig

from bench.contracts.method import CheckpointMethod
from bench.datasets.wilds import WildsData
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.jobs.checkpoint_runner import CheckpointRunner
from bench.jobs.classification_runner import shift_metrics
from bench.metrics import regression as regression_metrics

SPLIT_LABELS = {"id_test": "id", "ood_test": "ood"}


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


# ece_paper is NaN when every confidence is >= 0.99: no cell then.
RUNNER = CheckpointRunner(SPLIT_LABELS, split_scores, nan_means_no_cell=("ece_paper",))


@takes(datasets=(WildsData,), methods=(CheckpointMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit the method on the seed's checkpoints; score the ID and OOD test splits."""
    return RUNNER.run(cfg)
