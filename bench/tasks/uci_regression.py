"""SSLA paper Table 4: SSLA, ASSLA and LA on one UCI dataset, one shared base network.

One job = (dataset, protocol, seed). The data set follows the protocol (the paper's
preprocessing or the corrected one); the seed sets the split and the initialisation (42 is
the paper's). The base network (``cfg.base``) is trained once, as under the authors'
``seed_everything(42)`` every method saw the same network, and each row of ``cfg.rows`` (a
method from ``cfg.methods`` with its variant parameters) is fitted on it and scored on the
test set.
Rows are named ``<dataset title>/<row>``, the paper's layout.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from bench.datasets.uci import UCIRegressionData
from bench.harness.errors import require_choice
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.jobs.regression import build_method, regression_splits, score_method, train_base


@takes(datasets=(UCIRegressionData,))
def run(cfg: DictConfig) -> TaskResult:
    """Train the base network on ``cfg.dataset`` and score every row of ``cfg.rows``."""
    result = TaskResult()
    watch = Stopwatch()
    splits = regression_splits(cfg)
    result.timings["data_s"] = watch.elapsed()
    result.fitted["data"] = {key: value for key, value in splits.info.items()
                             if isinstance(value, (int, float, str, bool))}
    base = train_base(cfg, splits, result)
    for row, spec in cfg.rows.items():
        require_choice(f"rows.{row}.method", spec.method, tuple(cfg.methods))
        method_cfg = cfg.methods[spec.method]
        method = build_method(cfg, OmegaConf.to_container(spec.params, resolve=True),
                              method_cfg)
        score_method(cfg, method, splits, base, f"{cfg.dataset.title}/{row}", result)
    return result
