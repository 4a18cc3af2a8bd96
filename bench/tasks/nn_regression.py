"""Task of SSLA Table 2 / Figure 2: network methods on a regression dataset, scored centrally.

One job = (method, protocol, seed). Methods that fit on a base network (``fits_on_base``:
SSLA, ASSLA, LA, plug-in) share one per job, trained by the experiment's ``base`` node (the
authors' MSE MLP under ``protocol=paper``, the MAP network under ``corrected``), and each of
the method's variants (e.g. KFAC, DIAG, DENSE) is fitted on it. Cells: row ``<variant
row>``, columns ``cov95 cov90 cov75 cov50 nll crps rmse``; arrays keep the test predictions
for the figure.
"""

from __future__ import annotations

from omegaconf import DictConfig

from bench.contracts.method import RegressionNetworkMethod
from bench.datasets.toy import HeteroscedasticToyData
from bench.datasets.uci import UCIRegressionData
from bench.harness.method_nodes import method_class, method_variants
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.jobs.regression import build_method, regression_splits, score_method, train_base


@takes(datasets=(HeteroscedasticToyData, UCIRegressionData), methods=(RegressionNetworkMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit every variant of ``cfg.method`` on ``cfg.dataset`` and score it on the test set."""
    result = TaskResult()
    splits = regression_splits(cfg)
    result.arrays["x_test"] = splits.x_test[:, 0].tolist()
    result.arrays["y_test"] = splits.y_test[:, 0].tolist()
    base = train_base(cfg, splits, result) if method_class(cfg.method).fits_on_base else None
    for row, arguments in method_variants(cfg.method).items():
        score_method(cfg, build_method(cfg, arguments), splits, base, row, result)
    return result
