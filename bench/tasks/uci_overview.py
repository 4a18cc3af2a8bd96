"""SSLA paper Table 3: the UCI data sets as loaded, one job per (dataset, protocol).

Cells of row ``<dataset title>``: rows in the raw file and rows used (after dropping
incomplete ones), input columns before and after one-hot encoding, the train / val / test
sizes, the test size before subsampling and whether it was subsampled (1/0).
"""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig

from bench.datasets.uci import UCIRegressionData
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes


@takes(datasets=(UCIRegressionData,))
def run(cfg: DictConfig) -> TaskResult:
    """Load ``cfg.dataset`` under ``cfg.protocol`` and report its sizes."""
    splits = instantiate(cfg.dataset).splits(seed=int(cfg.seed))
    info = splits.info
    raw_inputs = (len(info["standardised"]) + len(info["unscaled"])
                  + len(info["one_hot_drop_first"]))
    cells = {
        "n_rows": info["n_rows"], "n_rows_used": info["n_rows_used"],
        "n_features_raw": raw_inputs, "n_features": info["n_features"],
        "n_train": info["n_train"], "n_val": info["n_val"],
        "n_test_full": info["n_test_before_subsample"], "n_test": info["n_test"],
        "subsampled": int(info["subsampled"]),
    }
    result = TaskResult()
    for column, value in cells.items():
        result.add(cfg.dataset.title, column, float(value))
    result.fitted["data"] = {key: value for key, value in info.items()
                             if isinstance(value, (int, float, str, bool))}
    return result
