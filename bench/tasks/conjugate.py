"""Task of Figures 1 and 3 and the BLR experiment: a method's grid predictive vs the exact PPD."""

from __future__ import annotations

import time

from hydra.utils import instantiate
from omegaconf import DictConfig

from bench.metrics.grid import compute_grid_metrics
from bench.predictive import GridDensity
from bench.result import TaskResult
from bench.rng import make_generator, resolve_dtype


def grid_ppd(cfg: DictConfig) -> TaskResult:
    """For each panel of the dataset: fit the method, predict on the grid, score vs exact.

    Cells: row ``<variant>/<panel>``, columns ``<method>_<metric>`` plus, for the first panel,
    the anchor quantities of the notes (theta-hat, log-likelihood, half log-det, log-PPD at the
    first grid point) so the report can put them beside the notes' values.
    """
    dtype = resolve_dtype(cfg.protocol.dtype)
    dataset = instantiate(cfg.dataset)
    method = instantiate(cfg.method)
    result = TaskResult()
    for problem in dataset.problems(make_generator(cfg.seed), dtype):
        start = time.perf_counter()
        method.fit(problem.model, problem.data)
        approx = method.predict(problem.x_new, problem.y_grid)
        result.timings[f"{problem.label}_s"] = time.perf_counter() - start
        exact = GridDensity(problem.y_grid, problem.exact_log_ppd)
        row = f"{cfg.variant}/{problem.label}"
        for metric, value in compute_grid_metrics(list(cfg.metrics.compute), approx, exact).items():
            result.add(row, f"{method.name}_{metric}", value)
        parts = method.last.parts
        result.add(row, f"{method.name}_log_ppd_first", approx.log_values[0])
        if method.name == "ssla":
            for index, value in enumerate(method.theta_hat.tolist()):
                result.add(row, f"theta_hat_{index}", value)
            result.add(row, "log_lik_hat", parts["log_lik_hat"])
            result.add(row, "half_logdet_hat", parts["half_logdet_hat"])
        result.arrays[f"{problem.label}/grid"] = problem.y_grid.double().tolist()
        result.arrays[f"{problem.label}/log_ppd"] = approx.log_values.double().tolist()
        result.arrays[f"{problem.label}/exact_log_ppd"] = problem.exact_log_ppd.tolist()
    return result
