"""Task of SSLA Tables 7 and 8: SSLA and ASSLA under several priors on one regression toy.

The method node (``method=ssla_assla``) has one variant per column (SSLA, ASSLA); each is
fitted on one :class:`ConjugateProblem` per prior whose one-point grid is the self-prediction
y-hat* (the MAP fit's prediction at ``dataset.x_test``) plus ``task.offset``.
"""

from __future__ import annotations

import math

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from bench.contracts.method import ConjugateMethod
from bench.datasets.conjugate_problems import ConjugateProblem, PriorModularityData
from bench.harness.fitted_variants import built_variants
from bench.harness.result import TaskResult
from bench.harness.rng import make_generator, resolve_dtype
from bench.harness.task_inputs import takes
from bench.models.conjugate_models import LinearGaussianModel
from bench.models.parametric import Data


def prior_row_label(variance: float) -> str:
    """Row name as the paper prints it: ``N(0,0.01)``, ``N(0,10^6)``."""
    exponent = math.log10(variance)
    if variance >= 1e3 and exponent.is_integer():
        return f"N(0,10^{int(exponent)})"
    return f"N(0,{variance:g})"


@takes(datasets=(PriorModularityData,), methods=(ConjugateMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Log-PPD at y = y-hat* + ``task.offset`` for each prior variance in ``dataset.prior_vars``.

    Cells per prior row: one column per method variant (SSLA, ASSLA), and for a nonzero
    offset SSLA-ASSLA and SSLA-SSLA_noninfo (the last, widest prior being the
    near-noninformative one).
    """
    proto = cfg.protocol
    dataset = instantiate(cfg.dataset)
    dtype = resolve_dtype(proto.dtype)
    x, y = dataset.design(make_generator(cfg.seed))
    data = Data(y=y.to(dtype), x=x.to(dtype).unsqueeze(1))
    x_row = torch.tensor([float(dataset.x_test)], dtype=dtype)
    methods = dict(built_variants(cfg.method, cfg.get("posterior")))
    result = TaskResult()
    ssla_by_prior = {}
    for variance in dataset.prior_vars:
        model = LinearGaussianModel(
            float(dataset.sigma) ** 2, torch.zeros(1, dtype=dtype),
            torch.tensor([[float(variance)]], dtype=dtype), with_constants=False,
        )
        theta_map = model.fit(data, proto.fit_objective)
        candidate = (model.predict_point(theta_map, x_row) + cfg.task.offset).reshape(1)
        row = prior_row_label(float(variance))
        problem = ConjugateProblem(row, model, data, x_row, candidate)
        values = {}
        for column, method in methods.items():
            fitted = method.fit(problem, int(cfg.seed))
            values[column] = float(method.predict(x_row).log_values[0])
            result.add(row, column, values[column])
        ssla_by_prior[row] = values["SSLA"]
        if cfg.task.offset != 0:
            result.add(row, "SSLA-ASSLA", values["SSLA"] - values["ASSLA"])
        result.fitted[row] = {"theta_hat": fitted["theta_hat"], "y_hat": float(candidate[0])}
    if cfg.task.offset != 0:
        noninformative = ssla_by_prior[prior_row_label(float(dataset.prior_vars[-1]))]
        for row, value in ssla_by_prior.items():
            result.add(row, "SSLA-SSLA_noninfo", value - noninformative)
    result.fitted["design_sum_sq"] = float(x.pow(2).sum())
    return result
