"""Task of SSLA Table 2 / Figure 2: network methods on a regression dataset, scored centrally.

One job = (method, protocol, seed), through :func:`~bench.jobs.regression_runner.scored_rows`:
each of the method's variants (e.g. KFAC, DIAG, DENSE) is fitted (on the shared base network
where the method fits on one) and scored. Cells: row ``<variant row>``, columns ``cov95 cov90
cov75 cov50 nll crps rmse``; arrays keep the test data and predictions for the figure.
"""

from __future__ import annotations

from omegaconf import DictConfig

from bench.contracts.method import RegressionNetworkMethod
from bench.datasets.toy import HeteroscedasticToyData
from bench.datasets.uci import UCIRegressionData
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.jobs.regression_runner import method_node_fits_on_base, method_node_rows, scored_rows


@takes(datasets=(HeteroscedasticToyData, UCIRegressionData), methods=(RegressionNetworkMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit every variant of ``cfg.method`` on ``cfg.dataset`` and score it on the test set."""
    return scored_rows(cfg, method_node_rows(cfg), fits_on_base=method_node_fits_on_base(cfg),
                       keep_test_data=True)
