"""Task of SSLA Table 1: ASSLA's subtract-two-aggregates increment in float32 vs float64."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from bench.contracts.capabilities import AggregateIncrement
from bench.datasets.conjugate_problems import ConjugateProblem, NormalNormalData
from bench.harness.errors import require_fits_in_memory, require_positive
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.rng import make_generator, resolve_dtype
from bench.harness.task_inputs import capability, takes
from bench.methods.ssla.algorithm import (
    AggregateLikelihoodIncrement,
    DirectLikelihoodIncrement,
    LikelihoodIncrement,
)
from bench.metrics.grid import compute_grid_metrics
from bench.models.conjugate_models import NormalMeanModel
from bench.models.parametric import Data
from bench.predictive.densities import GridDensity

# Arrays of n values alive at once (draws in two precisions, increments, log-likelihood
# terms): a lower bound of the job's memory, enough to refuse an n that cannot fit.
LIVE_ARRAYS = 4


@takes(datasets=(NormalNormalData,), methods=(AggregateIncrement,))
def run(cfg: DictConfig) -> TaskResult:
    """ASSLA on n normal draws: the paper's aggregate route in ``task.dtype`` vs a reference.

    The method node (``method=assla``) runs with the aggregate increment in ``task.dtype``
    and, as the reference, with the increment computed directly (log N(v; theta-hat,
    sigma2)) in float64 on the same draws. Cells: row ``n=<n>`` (float32) or
    ``n=<n>/float64``; columns as Table 1.
    """
    n = int(require_positive("task.n", cfg.task.n))
    require_fits_in_memory("task.n", n, LIVE_ARRAYS * 8 * n,
                           f"{LIVE_ARRAYS} float64 arrays of task.n values")
    dtype = resolve_dtype(cfg.task.dtype, key="task.dtype")
    ds = cfg.dataset
    draws = torch.normal(
        torch.full((n,), float(ds.mu)), torch.sqrt(torch.tensor(float(ds.sigma2))).expand(n),
        generator=make_generator(cfg.seed),
    )
    grid32 = torch.linspace(ds.grid_start, ds.grid_stop, ds.grid_num)

    def assla(dt: torch.dtype, increment: LikelihoodIncrement):
        model = NormalMeanModel(ds.sigma2, ds.prior_mean, ds.prior_var, dtype=dt)
        problem = ConjugateProblem(f"n={n}", model, Data(y=draws.to(dt)), None, grid32.to(dt))
        method = capability(instantiate_method(cfg.method, increment=increment),
                            AggregateIncrement)
        fitted = method.fit(problem, int(cfg.seed))
        return method.predict(None), method, fitted

    approx_grid, approx, fitted = assla(dtype, AggregateLikelihoodIncrement())
    reference_grid, _, _ = assla(torch.float64, DirectLikelihoodIncrement())
    approx_grid = GridDensity(grid32, approx_grid.log_values)
    reference_grid = GridDensity(grid32, reference_grid.log_values)
    names = ["kl", "max_abs_log_err", "frac_nonfinite"]
    metrics = compute_grid_metrics(names, approx_grid, reference_grid)
    increment = approx.last.parts["likelihood_increment"]
    metrics["frac_delta_eq_0"] = float((increment == 0).double().mean())
    row = f"n={n}" if dtype == torch.float32 else f"n={n}/{cfg.task.dtype}"
    result = TaskResult(metrics=dict(metrics))
    for column in ("kl", "max_abs_log_err", "frac_delta_eq_0", "frac_nonfinite"):
        result.add(row, column, metrics[column])
    result.fitted = {"theta_hat": fitted["theta_hat"], "n": n, "dtype": cfg.task.dtype}
    result.arrays = {
        "grid": grid32.double().tolist(),
        "log_ppd": approx_grid.log_values.double().tolist(),
        "reference_log_ppd": reference_grid.log_values.tolist(),
    }
    return result
