"""Task of SSLA Tables 5 and 6: Bayesian RBF regression on Lightning-UQ-Box's sine data.

The model (:mod:`bench.models.rbf_regression`) is y = Phi(x) w + eps with fixed Gaussian RBF
features Phi, eps ~ N(0, sigma^2) and w ~ N(0, tau^-1 I), sigma^2 and tau fitted by evidence
maximisation on the training set. It is linear-Gaussian, so the Laplace approximation is the
exact posterior and four predictives are compared on the test set: the plug-in
N(y-hat, sigma^2), the exact (= Laplace) predictive, and the variants of the method node
(``method=ssla_assla``: SSLA and ASSLA of :mod:`bench.methods.ssla.conjugate_ssla`) evaluated on
a y-grid around each plug-in prediction and moment-matched to a Gaussian (the grid is fine and
wide enough for the grid moments of a Gaussian to be exact to rounding).

Parts: :func:`fitted_blr` (data, evidence fit, reference predictives, the grid problem) ->
:func:`grid_predictives` (the method node's variants) -> :func:`predictive_cells` ->
:func:`blr_facts`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from bench.contracts.method import ConjugateMethod
from bench.datasets.conjugate_problems import ConjugateProblem
from bench.datasets.sine import ToySineData
from bench.harness.fitted_variants import fitted_variants
from bench.harness.result import TaskResult
from bench.harness.rng import make_generator, resolve_dtype
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.metrics.regression import regression_metrics
from bench.models.conjugate_models import LinearGaussianModel
from bench.models.parametric import Data
from bench.models.rbf_regression import EvidenceFit, RBFFeatures, evidence_fit
from bench.predictive.densities import Gaussian

PLUGIN = "Deterministic (plugin)"
EXACT = "Laplace/Exact"
SSLA = "SSLA"
ASSLA = "ASSLA"
ROWS = (PLUGIN, EXACT, ASSLA, SSLA)


def candidate_grid(centre: Tensor, scale: Tensor, half_width_sd: float, num: int) -> Tensor:
    """Per-row y-grid ``centre ± half_width_sd * scale`` with ``num`` points, ``(N, num)``."""
    offsets = torch.linspace(-half_width_sd, half_width_sd, int(num), dtype=centre.dtype)
    return centre.unsqueeze(-1) + scale.unsqueeze(-1) * offsets


def grid_predictives(cfg: DictConfig, problem: ConjugateProblem) -> tuple[dict, dict]:
    """Each variant of ``cfg.method`` fitted on ``problem`` and moment-matched on its per-row
    grids: ``({row: Gaussian}, {"<name>_s": seconds})``."""
    predictives, timings = {}, {}
    for variant in fitted_variants(cfg.method, problem, int(cfg.seed),
                                   posterior=cfg.get("posterior")):
        watch = Stopwatch()
        density = variant.method.predict(problem.x_new)
        timings[f"{variant.method.name}_s"] = variant.fit_s + watch.elapsed()
        predictives[variant.row] = Gaussian(density.mean, density.variance)
    return predictives, timings


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads (None: unchanged), then restore.

    The per-candidate refits are 20x20 solves; on a shared machine extra threads only contend.
    """
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _max_gaps(approx: Gaussian, reference: Gaussian) -> dict[str, float]:
    return {
        "mean_max_abs_err": float((approx.mean - reference.mean).abs().max()),
        "sd_max_rel_err": float((approx.stddev / reference.stddev - 1).abs().max()),
    }


@dataclass(frozen=True)
class SineBLR:
    """One seed's fitted BLR: the evidence fit, the plug-in and exact predictives on the test
    inputs, the grid problem the methods fit on, the test targets and the fit's seconds."""

    fit: EvidenceFit
    plugin: Gaussian
    exact: Gaussian
    problem: ConjugateProblem
    y_test: Tensor
    n_train: int
    n_test: int
    fit_s: float


def fitted_blr(cfg: DictConfig) -> SineBLR:
    """Split one seed's sine data, fit the BLR on RBF features by evidence maximisation and
    build the per-row y-grids around the plug-in predictions."""
    dtype = resolve_dtype(cfg.protocol.dtype)
    dataset = instantiate(cfg.dataset)
    split = dataset.split(make_generator(cfg.seed))
    features = RBFFeatures.on_grid(dataset.x_min, dataset.x_max, cfg.task.n_centres,
                                   cfg.task.lengthscale)
    design, design_test = features(split.x_train).to(dtype), features(split.x_test).to(dtype)
    y_train = split.y_train.to(dtype)
    watch = Stopwatch()
    fit = evidence_fit(design, y_train, cfg.task.evidence_max_iter, cfg.task.evidence_tol)
    q = design.shape[1]
    model = LinearGaussianModel(fit.noise_variance, torch.zeros(q, dtype=dtype),
                                torch.eye(q, dtype=dtype) / fit.prior_precision)
    data = Data(y=y_train, x=design)
    y_hat = (design_test @ model.fit(data, cfg.protocol.fit_objective)).double()
    post_mean, post_cov = model.posterior(data)
    design64 = design_test.double()
    exact_var = fit.noise_variance + ((design64 @ post_cov) * design64).sum(-1)
    plugin = Gaussian(y_hat, torch.full_like(y_hat, fit.noise_variance))
    exact = Gaussian(design64 @ post_mean, exact_var)
    fit_s = watch.elapsed()
    noise_sd = torch.full_like(y_hat, math.sqrt(fit.noise_variance))
    grid = candidate_grid(y_hat, noise_sd, cfg.task.grid_sd, cfg.task.grid_num).to(dtype)
    problem = ConjugateProblem("test", model, data, design_test, grid)
    return SineBLR(fit, plugin, exact, problem, split.y_test.double(),
                   int(split.x_train.numel()), int(split.x_test.numel()), fit_s)


def predictive_cells(cfg: DictConfig, predictives: dict[str, Gaussian], y_test: Tensor,
                     result: TaskResult) -> None:
    """Cells ``metrics.compute`` of each row, intervals by ``protocol.interval_z``."""
    compute = list(cfg.metrics.compute)
    levels = tuple(int(name[3:]) for name in compute if name.startswith("cov"))
    for row in ROWS:
        scores = regression_metrics(predictives[row], y_test, levels=levels,
                                    z=cfg.protocol.interval_z)
        for column in compute:
            result.add(row, column, scores[column])


def blr_facts(cfg: DictConfig, blr: SineBLR, predictives: dict[str, Gaussian]) -> dict:
    """The evidence fit, sizes, and how far SSLA is from the exact predictive and ASSLA from
    the plug-in (the paper's printed identities)."""
    fit = blr.fit
    return {
        "noise_variance": fit.noise_variance,
        "prior_precision": fit.prior_precision,
        "effective_parameters": fit.effective_parameters,
        "evidence_iterations": fit.iterations,
        "evidence_converged": fit.converged,
        "n_train": blr.n_train,
        "n_test": blr.n_test,
        "n_features": int(blr.problem.data.x.shape[1]),
        "grid_step_over_noise_sd": 2 * cfg.task.grid_sd / (cfg.task.grid_num - 1),
        "ssla_vs_exact": _max_gaps(predictives[SSLA], blr.exact),
        "assla_vs_plugin": _max_gaps(predictives[ASSLA], blr.plugin),
    }


@takes(datasets=(ToySineData,), methods=(ConjugateMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit the BLR on one seed's training split; score the four predictives on its test split.

    Runs with ``threads`` torch threads (restored afterwards). Cells: rows
    ``Deterministic (plugin)``, ``Laplace/Exact``, ``ASSLA``, ``SSLA``; columns
    ``metrics.compute`` (rmse, nll, cov90, cov95), intervals by ``protocol.interval_z``.
    ``fitted`` keeps the evidence fit, sizes, and how far SSLA is from the exact predictive
    and ASSLA from the plug-in.
    """
    with torch_threads(cfg.get("threads")):
        blr = fitted_blr(cfg)
        predictives, timings = grid_predictives(cfg, blr.problem)
        predictives |= {PLUGIN: blr.plugin, EXACT: blr.exact}
        result = TaskResult()
        predictive_cells(cfg, predictives, blr.y_test, result)
        result.fitted = blr_facts(cfg, blr, predictives)
        result.timings.update(fit_s=blr.fit_s, **timings)
        return result
