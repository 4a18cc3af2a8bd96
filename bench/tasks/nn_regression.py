"""Task of SSLA Table 2 / Figure 2: network methods on a regression dataset, scored centrally.

One job = (method, protocol, seed). Methods that fit on a base network (``fits_on_base``:
SSLA, ASSLA, LA, plug-in) share one per job, trained by the experiment's ``base`` node (the
authors' MSE MLP under ``protocol=paper``, the MAP network under ``corrected``), and each of
the method's variants (e.g. KFAC, DIAG, DENSE) is fitted on it. Cells: row ``<variant
row>``, columns ``cov95 cov90 cov75 cov50 nll crps rmse``; arrays keep the test predictions
for the figure.
"""

from __future__ import annotations

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from bench.datasets.toy import HeteroscedasticToyData
from bench.datasets.uci import UCIRegressionData
from bench.harness.errors import ConfigError
from bench.harness.overrides import group_options
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.methods.base import (
    Method,
    instantiate_method,
    method_arguments,
    method_class,
    method_variants,
)
from bench.methods.baselines.deep_ensemble import DeepEnsembleMethod
from bench.methods.baselines.hmc import HMCMethod
from bench.methods.baselines.plugin import PluginMethod
from bench.methods.baselines.vi import AlphaVIMethod, MFVIMethod
from bench.methods.laplace.laplace_torch import LaplaceTorchMethod
from bench.methods.ssla.network import NetworkASSLA, NetworkSSLA
from bench.metrics.regression import regression_metrics


@takes(datasets=(HeteroscedasticToyData, UCIRegressionData),
       methods=(NetworkASSLA, NetworkSSLA, LaplaceTorchMethod, PluginMethod, MFVIMethod,
                AlphaVIMethod, HMCMethod, DeepEnsembleMethod))
def run(cfg: DictConfig) -> TaskResult:
    """Fit every variant of ``cfg.method`` on ``cfg.dataset`` and score it on the test set."""
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    result = TaskResult()
    splits = instantiate(cfg.dataset).splits(seed=int(cfg.seed))
    result.arrays["x_test"] = splits.x_test[:, 0].tolist()
    result.arrays["y_test"] = splits.y_test[:, 0].tolist()
    base = None
    if method_class(cfg.method).fits_on_base:
        watch = Stopwatch()
        base = train_base(cfg, splits)
        result.timings["base_s"] = watch.elapsed()
        result.fitted["base"] = base.diagnostics
    for row, arguments in method_variants(cfg.method).items():
        method = build_method(cfg, arguments)
        score_method(cfg, method, splits, base, row, result)
    return result


def score_method(cfg: DictConfig, method: Method, splits, base, row: str,
                 result: TaskResult) -> None:
    """Fit ``method`` (on ``base``, None for methods without one), predict the test set and
    add row ``row``'s cells, timing, fitted values and predictive mean/sd arrays to
    ``result``; a method's optional ``prediction_diagnostics()`` (e.g. SSLA's refit
    convergence) become metrics ``<row>/<name>``."""
    watch = Stopwatch()
    diagnostics = method.fit(splits, int(cfg.seed), base)
    predictive = method.predict(splits.x_test)
    result.timings[f"{row}_s"] = watch.elapsed()
    scores = regression_metrics(predictive, splits.y_test[:, 0], z=cfg.protocol.interval_z)
    for column, value in scores.items():
        result.add(row, column, value)
    result.fitted[row] = _plain(diagnostics)
    diagnose = getattr(method, "prediction_diagnostics", None)
    for name, value in (diagnose() if diagnose is not None else {}).items():
        result.metrics[f"{row}/{name}"] = float(value)
    result.arrays[f"{row}/mean"] = predictive.mean.double().tolist()
    result.arrays[f"{row}/sd"] = predictive.variance.double().sqrt().tolist()


def build_method(cfg: DictConfig, arguments: dict, method_cfg: DictConfig | None = None) -> Method:
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


def train_base(cfg: DictConfig, splits):
    """The base network of the Laplace-family methods: ``cfg.base`` trained on ``splits``."""
    if cfg.get("base") is None:
        options = ", ".join(group_options()["base"])
        raise ConfigError(f"method={cfg.method.name} fits on a base network, but the "
                          f"experiment has none; choose one with base=<option> ({options})")
    return instantiate(cfg.base, _convert_="all")(splits, seed=int(cfg.seed))


def _plain(values) -> dict:
    """Diagnostics as JSON-friendly floats and strings."""
    out = {}
    for key, value in (values or {}).items():
        if isinstance(value, (int, float, str, bool)) or value is None:
            out[key] = value
        elif isinstance(value, torch.Tensor) and value.numel() == 1:
            out[key] = float(value)
    return out
