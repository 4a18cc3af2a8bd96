"""Task of SSLA Tables 7 and 8: SSLA and ASSLA under several priors on one regression toy."""

from __future__ import annotations

import math

import torch
from omegaconf import DictConfig

from bench.harness.errors import require_positive
from bench.harness.result import TaskResult
from bench.harness.rng import make_generator, resolve_dtype
from bench.methods.ssla.algorithm import assla_log_ppd, ssla_log_ppd
from bench.models.conjugate import LinearGaussianModel
from bench.models.parametric import Data


def prior_row_label(variance: float) -> str:
    """Row name as the paper prints it: ``N(0,0.01)``, ``N(0,10^6)``."""
    exponent = math.log10(variance)
    if variance >= 1e3 and exponent.is_integer():
        return f"N(0,10^{int(exponent)})"
    return f"N(0,{variance:g})"


def make_design(cfg: DictConfig, rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """x ~ N(0, 1) rescaled to ``dataset.design_sum_sq`` (if set), y = slope x + N(0, sigma^2)."""
    ds = cfg.dataset
    n = int(require_positive("dataset.n", ds.n))
    x = torch.randn(n, generator=rng, dtype=torch.float64)
    if ds.design_sum_sq is not None:
        target = require_positive("dataset.design_sum_sq", ds.design_sum_sq)
        x = x * math.sqrt(target / x.pow(2).sum())
    y = ds.slope * x + ds.sigma * torch.randn(n, generator=rng, dtype=torch.float64)
    return x, y


def run(cfg: DictConfig) -> TaskResult:
    """Log-PPD at y = y-hat* + ``task.offset`` for each prior variance in ``dataset.prior_vars``.

    Cells per prior row: SSLA, ASSLA, and for a nonzero offset SSLA-ASSLA and
    SSLA-SSLA_noninfo (the last, widest prior being the near-noninformative one).
    """
    ds, proto = cfg.dataset, cfg.protocol
    dtype = resolve_dtype(proto.dtype)
    x, y = make_design(cfg, make_generator(cfg.seed))
    data = Data(y=y.to(dtype), x=x.to(dtype).unsqueeze(1))
    x_row = torch.tensor([float(ds.x_test)], dtype=dtype)
    result = TaskResult()
    ssla_by_prior = {}
    for variance in ds.prior_vars:
        model = LinearGaussianModel(
            float(ds.sigma) ** 2, torch.zeros(1, dtype=dtype),
            torch.tensor([[float(variance)]], dtype=dtype), with_constants=False,
        )
        theta_hat = model.fit(data, proto.fit_objective)
        candidate = (model.predict_point(theta_hat, x_row) + cfg.task.offset).reshape(1)
        common = dict(objective=proto.fit_objective, theta_hat=theta_hat,
                      curvature_includes_prior=proto.curvature_includes_prior)
        ssla = float(ssla_log_ppd(model, data, x_row, candidate, **common).values[0])
        assla = float(
            assla_log_ppd(model, data, x_row, candidate, increment=proto.assla_increment,
                          **common).values[0]
        )
        row = prior_row_label(float(variance))
        ssla_by_prior[row] = ssla
        result.add(row, "SSLA", ssla)
        result.add(row, "ASSLA", assla)
        if cfg.task.offset != 0:
            result.add(row, "SSLA-ASSLA", ssla - assla)
        result.fitted[row] = {"theta_hat": theta_hat.tolist(), "y_hat": float(candidate[0])}
    if cfg.task.offset != 0:
        noninformative = ssla_by_prior[prior_row_label(float(ds.prior_vars[-1]))]
        for row, value in ssla_by_prior.items():
            result.add(row, "SSLA-SSLA_noninfo", value - noninformative)
    result.fitted["design_sum_sq"] = float(x.pow(2).sum())
    return result
