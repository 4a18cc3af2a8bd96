"""SSLA paper Table 4: SSLA, ASSLA and LA on one UCI dataset, one shared base network.

One job = (dataset, protocol, seed), through
:func:`~bench.jobs.regression_runner.scored_rows`.
The data set follows the protocol (the paper's preprocessing or the corrected one); the seed
sets the split and the initialisation (42 is the paper's). The base network (``cfg.base``) is
trained once, as under the authors' ``seed_everything(42)`` every method saw the same network,
and each row of ``cfg.rows`` (a method from ``cfg.methods`` with its variant parameters) is
fitted on it and scored on the test set. Rows are named ``<dataset title>/<row>``, the
paper's layout.
"""

from __future__ import annotations

from collections.abc import Iterator

from omegaconf import DictConfig, OmegaConf

from bench.contracts.method import RegressionNetworkMethod
from bench.datasets.uci import UCIRegressionData
from bench.harness.errors import require_choice
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.jobs.regression_runner import build_method, scored_rows


def table_rows(cfg: DictConfig) -> Iterator[tuple[str, RegressionNetworkMethod]]:
    """Each row of ``cfg.rows``: its method of ``cfg.methods`` with the row's parameters."""
    for row, spec in cfg.rows.items():
        require_choice(f"rows.{row}.method", spec.method, tuple(cfg.methods))
        method = build_method(cfg, OmegaConf.to_container(spec.params, resolve=True),
                              cfg.methods[spec.method])
        yield f"{cfg.dataset.title}/{row}", method


@takes(datasets=(UCIRegressionData,))
def run(cfg: DictConfig) -> TaskResult:
    """Train the base network on ``cfg.dataset`` and score every row of ``cfg.rows``."""
    return scored_rows(cfg, table_rows(cfg), fits_on_base=True, keep_data_info=True)
