"""The runner of network regression (SSLA Table 2 / Figure 2 and Table 4).

:func:`scored_rows`: the dataset node's splits -> the shared base network -> each row's
method fitted and predicting the test set -> :func:`~bench.metrics.regression.regression_metrics`
-> the row's cells ``cov95 cov90 cov75 cov50 nll crps rmse``. A task hands it the rows it
scores (:func:`method_node_rows`: every variant of ``cfg.method``) and what else the record
keeps. Methods that fit on a base network (``fits_on_base``: SSLA, ASSLA, LA, plug-in)
share one per job, trained by the experiment's ``base`` node (the authors' MSE MLP under
``protocol=paper``, the MAP network under ``corrected``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from bench.contracts.capabilities import PredictionDiagnostics
from bench.contracts.method import RegressionNetworkMethod
from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import ConfigError
from bench.harness.fitted_variants import job_variants
from bench.harness.method_nodes import (
    instantiate_method,
    method_arguments,
    method_class,
)
from bench.harness.overrides import group_options
from bench.harness.result import TaskResult
from bench.harness.timing import Stopwatch
from bench.metrics.fit_health import assess, regression_checks
from bench.metrics.regression import regression_metrics


def regression_splits(cfg: DictConfig) -> RegressionSplits:
    """The dataset node's splits for ``cfg.seed`` (with ``threads`` torch threads set)."""
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    return instantiate(cfg.dataset).splits(seed=int(cfg.seed))


def build_method(cfg: DictConfig, arguments: dict,
                 method_cfg: DictConfig | None = None) -> RegressionNetworkMethod:
    """The method of ``method_cfg`` (default ``cfg.method``) with its tuned values
    (``cfg.tuned.<name>``), the variant's ``arguments`` over them, and any ``method_limits``
    it accepts over both."""
    method_cfg = cfg.method if method_cfg is None else method_cfg
    cls = method_class(method_cfg)
    accepted = set(method_arguments(cls))
    tuned_all = cfg.get("tuned")
    tuned = {}
    if tuned_all is not None and method_cfg.name in tuned_all:
        tuned = OmegaConf.to_container(tuned_all[method_cfg.name], resolve=True)
    limits = {key: value for key, value in (cfg.get("method_limits") or {}).items()
              if key in accepted and value is not None}
    unknown = sorted(set(tuned) - accepted)
    if unknown:
        raise ConfigError(f"tuned.{method_cfg.name} has {unknown}, which "
                          f"{cls.__name__} does not take (fields: {sorted(accepted)})")
    return instantiate_method(method_cfg, **{**tuned, **arguments, **limits})


def train_base(cfg: DictConfig, splits: RegressionSplits, result: TaskResult):
    """The base network of the Laplace-family methods: ``cfg.base`` trained on ``splits``
    (timing ``base_s`` and ``fitted.base`` into ``result``)."""
    if cfg.get("base") is None:
        options = ", ".join(group_options()["base"])
        raise ConfigError(f"method={cfg.method.name} fits on a base network, but the "
                          f"experiment has none; choose one with base=<option> ({options})")
    watch = Stopwatch()
    base = instantiate(cfg.base, _convert_="all")(splits, seed=int(cfg.seed))
    result.timings["base_s"] = watch.elapsed()
    result.fitted["base"] = base.diagnostics
    return base


def score_method(cfg: DictConfig, method: RegressionNetworkMethod, splits: RegressionSplits,
                 base, row: str, result: TaskResult) -> None:
    """Fit ``method`` (on ``base``, None for methods without one), predict the test set and
    add row ``row``'s cells, timing, fitted values and predictive mean/sd arrays to
    ``result``; a method with :class:`PredictionDiagnostics` (e.g. SSLA's refit convergence)
    adds them as metrics ``<row>/<name>``."""
    watch = Stopwatch()
    diagnostics = method.fit(splits, int(cfg.seed), base)
    predictive = method.predict(splits.x_test)
    result.timings[f"{row}_s"] = watch.elapsed()
    scores = regression_metrics(predictive, splits.y_test[:, 0], z=cfg.protocol.interval_z)
    for column, value in scores.items():
        result.add(row, column, value)
    result.health[row] = assess(regression_checks(scores["nll"], predictive.mean,
                                                  splits.y_test[:, 0]))
    result.fitted[row] = plain_values(diagnostics)
    if isinstance(method, PredictionDiagnostics):
        for name, value in method.prediction_diagnostics().items():
            result.metrics[f"{row}/{name}"] = float(value)
    result.arrays[f"{row}/mean"] = predictive.mean.double().tolist()
    result.arrays[f"{row}/sd"] = predictive.variance.double().sqrt().tolist()


def method_node_rows(cfg: DictConfig) -> Iterator[tuple[str, RegressionNetworkMethod]]:
    """Every variant of ``cfg.method`` (its row name, the built method), built when the loop
    reaches it (after the base network is trained)."""
    for row, arguments in job_variants(cfg.method, cfg.get("posterior")).items():
        yield row, build_method(cfg, arguments)


def method_node_fits_on_base(cfg: DictConfig) -> bool:
    """Whether ``cfg.method``'s class fits on a base network."""
    return bool(method_class(cfg.method).fits_on_base)


def scored_rows(cfg: DictConfig, rows: Iterable[tuple[str, RegressionNetworkMethod]], *,
                fits_on_base: bool, keep_test_data: bool = False,
                keep_data_info: bool = False) -> TaskResult:
    """Data -> base network (where ``fits_on_base``) -> each of ``rows`` (row name, method;
    a generator builds each when reached) fitted, predicting the test set and scored
    (:func:`score_method`). ``keep_test_data``: arrays ``x_test`` / ``y_test`` for a figure;
    ``keep_data_info``: the split's timing ``data_s`` and its plain ``info`` as
    ``fitted.data``."""
    result = TaskResult()
    watch = Stopwatch()
    splits = regression_splits(cfg)
    if keep_data_info:
        result.timings["data_s"] = watch.elapsed()
        result.fitted["data"] = {key: value for key, value in splits.info.items()
                                 if isinstance(value, (int, float, str, bool))}
    if keep_test_data:
        result.arrays["x_test"] = splits.x_test[:, 0].tolist()
        result.arrays["y_test"] = splits.y_test[:, 0].tolist()
    base = train_base(cfg, splits, result) if fits_on_base else None
    for row, method in rows:
        score_method(cfg, method, splits, base, row, result)
    return result


def plain_values(values: dict[str, Any] | None) -> dict:
    """Diagnostics as JSON-friendly floats and strings."""
    out = {}
    for key, value in (values or {}).items():
        if isinstance(value, (int, float, str, bool)) or value is None:
            out[key] = value
        elif isinstance(value, torch.Tensor) and value.numel() == 1:
            out[key] = float(value)
    return out
