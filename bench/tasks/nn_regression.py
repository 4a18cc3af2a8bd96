"""Task of SSLA Table 2 / Figure 2: network methods on a regression dataset, scored centrally.

One job = (method, protocol, seed). Laplace-family methods (``method.family: laplace``) share
one base network per job, trained per ``base`` (the authors' MSE MLP under
``protocol=paper``, the MAP network under ``corrected``), and evaluate each of their variants
(e.g. KFAC, DIAG, DENSE) on it. Cells: row ``<variant row>``, columns ``cov95 cov90 cov75
cov50 nll crps rmse``; arrays keep the test predictions for the figure.
"""

from __future__ import annotations

import dataclasses

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from bench.harness.errors import ConfigError
from bench.harness.result import TaskResult
from bench.harness.rng import resolve_dtype
from bench.harness.timing import Stopwatch
from bench.metrics.regression import regression_metrics
from bench.training.regression_network import train_map_mlp, train_paper_mlp


def run(cfg: DictConfig) -> TaskResult:
    """Fit every variant of ``cfg.method`` on ``cfg.dataset`` and score it on the test set."""
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    result = TaskResult()
    splits = instantiate(cfg.dataset.loader)(seed=int(cfg.seed))
    result.arrays["x_test"] = splits.x_test[:, 0].tolist()
    result.arrays["y_test"] = splits.y_test[:, 0].tolist()
    base = None
    if cfg.method.family == "laplace":
        watch = Stopwatch()
        base = train_base(cfg, splits)
        result.timings["base_s"] = watch.elapsed()
        result.fitted["base"] = base.diagnostics
    for row, params in cfg.method.variants.items():
        method = build_method(cfg, OmegaConf.to_container(params))
        score_method(cfg, method, splits, base, row, result)
    return result


def score_method(cfg: DictConfig, method, splits, base, row: str, result: TaskResult) -> None:
    """Fit ``method`` (on ``base`` when given), predict the test set and add row ``row``'s
    cells, timing, fitted values and predictive mean/sd arrays to ``result``."""
    watch = Stopwatch()
    if base is None:
        diagnostics = method.fit(splits, int(cfg.seed))
    else:
        diagnostics = method.fit(splits, int(cfg.seed), base)
    predictive = method.predict(splits.x_test)
    result.timings[f"{row}_s"] = watch.elapsed()
    scores = regression_metrics(predictive, splits.y_test[:, 0], z=cfg.protocol.interval_z)
    for column, value in scores.items():
        result.add(row, column, value)
    result.fitted[row] = _plain(diagnostics)
    result.arrays[f"{row}/mean"] = predictive.mean.double().tolist()
    result.arrays[f"{row}/sd"] = predictive.variance.double().sqrt().tolist()


def build_method(cfg: DictConfig, params: dict, method_cfg: DictConfig | None = None):
    """The method adapter (``method_cfg``, default ``cfg.method``) with its tuned values
    (``cfg.tuned.<name>``), the variant's parameters over them, and any ``method_limits``
    it accepts over both."""
    method_cfg = cfg.method if method_cfg is None else method_cfg
    factory = instantiate(method_cfg.adapter)
    accepted = {f.name for f in dataclasses.fields(factory.func)}
    tuned_all = cfg.get("tuned")
    tuned = {}
    if tuned_all is not None and method_cfg.name in tuned_all:
        tuned = OmegaConf.to_container(tuned_all[method_cfg.name], resolve=True)
    limits = {key: value for key, value in (cfg.get("method_limits") or {}).items()
              if key in accepted and value is not None}
    unknown = sorted(set(tuned) - accepted)
    if unknown:
        raise ConfigError(f"tuned.{method_cfg.name} has {unknown}, which "
                          f"{factory.func.__name__} does not take (fields: {sorted(accepted)})")
    return factory(**{**tuned, **params, **limits})


def train_base(cfg: DictConfig, splits):
    """The base network of the Laplace-family methods, per ``cfg.base.kind``."""
    base = cfg.base
    if base.kind == "paper_mlp":
        return train_paper_mlp(splits, seed=int(cfg.seed), lr=base.lr,
                               batch_size=base.batch_size, n_hidden=tuple(base.n_hidden),
                               activation=base.activation, max_epochs=base.max_epochs,
                               patience=base.patience)
    return train_map_mlp(splits, seed=int(cfg.seed), lr=base.lr, batch_size=base.batch_size,
                         n_hidden=tuple(base.n_hidden), activation=base.activation,
                         prior_precision=base.prior_precision, max_epochs=base.max_epochs,
                         patience=base.patience, dtype=resolve_dtype(cfg.protocol.dtype),
                         polish_rounds=int(base.get("polish_rounds", 0)))


def _plain(values) -> dict:
    """Diagnostics as JSON-friendly floats and strings."""
    out = {}
    for key, value in (values or {}).items():
        if isinstance(value, (int, float, str, bool)) or value is None:
            out[key] = value
        elif isinstance(value, torch.Tensor) and value.numel() == 1:
            out[key] = float(value)
    return out
