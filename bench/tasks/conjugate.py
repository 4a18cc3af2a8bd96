"""Task of Figures 1 and 3 and the BLR experiment: a method's grid predictive vs the exact PPD."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig

from bench.contracts.method import ConjugateMethod
from bench.datasets.conjugate_problems import (
    LinearRegressionData,
    NormalNormalData,
    PoissonGammaData,
)
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.rng import make_generator, resolve_dtype
from bench.harness.task_inputs import capability, takes
from bench.harness.timing import Stopwatch
from bench.metrics.grid import compute_grid_metrics
from bench.predictive.densities import GridDensity


@takes(datasets=(NormalNormalData, PoissonGammaData, LinearRegressionData),
       methods=(ConjugateMethod,))
def grid_ppd(cfg: DictConfig) -> TaskResult:
    """For each panel of the dataset: fit the method, predict on the grid, score vs exact.

    Cells: row ``<variant>/<panel>``, column ``<method>_kl`` (the paper's "entropy" score).
    ``fitted[<panel>]`` keeps the notes' anchor quantities (theta-hat, log-likelihood and half
    log-det at theta-hat, the log-PPD at the first grid point, ASSLA's curvature increment)
    and the other grid metrics; ``arrays`` keep the curves for the figure.
    """
    dtype = resolve_dtype(cfg.protocol.dtype)
    dataset = instantiate(cfg.dataset)
    method = capability(instantiate_method(cfg.method), ConjugateMethod)
    result = TaskResult()
    for problem in dataset.problems(make_generator(cfg.seed), dtype):
        watch = Stopwatch()
        fitted = method.fit(problem, int(cfg.seed))
        approx = method.predict(problem.x_new)
        result.timings[f"{problem.label}_s"] = watch.elapsed()
        exact = GridDensity(problem.y_grid, problem.exact_log_ppd)
        scores = compute_grid_metrics(list(cfg.metrics.compute), approx, exact)
        result.add(f"{cfg.variant}/{problem.label}", f"{method.name}_kl", scores.pop("kl"))
        parts = method.last.parts
        result.fitted[problem.label] = {
            "theta_hat": fitted["theta_hat"],
            "log_lik_hat": float(parts["log_lik_hat"]),
            "half_logdet_hat": float(parts["half_logdet_hat"]),
            "log_ppd_first": float(approx.log_values[0]),
            **{key: float(value[0]) for key, value in parts.items() if value.ndim == 1},
            **scores,
        }
        result.arrays[f"{problem.label}/grid"] = problem.y_grid.double().tolist()
        result.arrays[f"{problem.label}/log_ppd"] = approx.log_values.double().tolist()
        result.arrays[f"{problem.label}/exact_log_ppd"] = problem.exact_log_ppd.tolist()
    return result
