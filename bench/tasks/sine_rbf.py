"""Task of SSLA Tables 5 and 6: Bayesian RBF regression on Lightning-UQ-Box's sine data.

The model is y = Phi(x) w + eps with fixed Gaussian RBF features Phi, eps ~ N(0, sigma^2) and
w ~ N(0, tau^-1 I), sigma^2 and tau fitted by evidence maximisation on the training set. It is
linear-Gaussian, so the Laplace approximation is the exact posterior and four predictives are
compared on the test set: the plug-in N(y-hat, sigma^2), the exact (= Laplace) predictive, and
the variants of the method node (``method=ssla_assla``: SSLA and ASSLA of
:mod:`bench.methods.ssla.conjugate_ssla`) evaluated on a y-grid around each plug-in prediction and
moment-matched to a Gaussian (the grid is fine and wide enough for the grid moments of a
Gaussian to be exact to rounding).
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
from bench.harness.errors import require_positive
from bench.harness.method_nodes import instantiate_method, method_variants
from bench.harness.result import TaskResult
from bench.harness.rng import make_generator, resolve_dtype
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.metrics.regression import regression_metrics
from bench.models.conjugate_models import LinearGaussianModel
from bench.models.parametric import Data
from bench.predictive.densities import Gaussian

PLUGIN = "Deterministic (plugin)"
EXACT = "Laplace/Exact"
SSLA = "SSLA"
ASSLA = "ASSLA"
ROWS = (PLUGIN, EXACT, ASSLA, SSLA)


@dataclass(frozen=True)
class RBFFeatures:
    """Gaussian bumps exp(-(x - c)^2 / (2 l^2)) at fixed centres ``c``, one column each."""

    centres: Tensor
    lengthscale: float

    @classmethod
    def on_grid(cls, low: float, high: float, n_centres: int, lengthscale: float) -> RBFFeatures:
        """``n_centres`` equispaced centres on [low, high] (float64)."""
        require_positive("task.n_centres", n_centres)
        require_positive("task.lengthscale", lengthscale)
        centres = torch.linspace(low, high, int(n_centres), dtype=torch.float64)
        return cls(centres, float(lengthscale))

    def __call__(self, x: Tensor) -> Tensor:
        """Design matrix ``(len(x), n_centres)`` in float64."""
        scaled = (x.double().unsqueeze(-1) - self.centres) / self.lengthscale
        return torch.exp(-0.5 * scaled**2)


@dataclass(frozen=True)
class EvidenceFit:
    """Evidence-maximising noise variance and prior precision, and how they were reached."""

    noise_variance: float
    prior_precision: float
    effective_parameters: float
    iterations: int
    converged: bool


def evidence_fit(design: Tensor, y: Tensor, max_iter: int = 200,
                 tol: float = 1e-10) -> EvidenceFit:
    """MacKay's fixed-point updates of the closed-form evidence of Bayesian linear regression.

    With beta = 1 / sigma^2 and alpha = tau: gamma = sum_i beta l_i / (beta l_i + alpha) over
    the eigenvalues l_i of Phi^T Phi, alpha = gamma / |m|^2, 1 / beta = |y - Phi m|^2 / (n -
    gamma), m the posterior mean (Bishop, PRML §3.5.2). Stops when both change by less than
    ``tol`` relatively.
    """
    design, y = design.double(), y.double()
    gram, moment = design.T @ design, design.T @ y
    eigenvalues = torch.linalg.eigvalsh(gram).clamp(min=0.0)
    eye = torch.eye(gram.shape[0], dtype=gram.dtype)
    alpha, beta = 1.0, 1.0 / float(y.var())
    gamma, converged, iterations = 0.0, False, 0
    while not converged and iterations < int(max_iter):
        iterations += 1
        mean = beta * torch.linalg.solve(alpha * eye + beta * gram, moment)
        gamma = float((beta * eigenvalues / (beta * eigenvalues + alpha)).sum())
        new_alpha = gamma / float(mean @ mean)
        new_beta = (y.numel() - gamma) / float(((y - design @ mean) ** 2).sum())
        converged = (abs(new_alpha - alpha) <= tol * new_alpha
                     and abs(new_beta - beta) <= tol * new_beta)
        alpha, beta = new_alpha, new_beta
    return EvidenceFit(1.0 / beta, alpha, gamma, iterations, converged)


def candidate_grid(centre: Tensor, scale: Tensor, half_width_sd: float, num: int) -> Tensor:
    """Per-row y-grid ``centre ± half_width_sd * scale`` with ``num`` points, ``(N, num)``."""
    offsets = torch.linspace(-half_width_sd, half_width_sd, int(num), dtype=centre.dtype)
    return centre.unsqueeze(-1) + scale.unsqueeze(-1) * offsets


def grid_predictives(cfg: DictConfig, problem: ConjugateProblem) -> tuple[dict, dict]:
    """Each variant of ``cfg.method`` fitted on ``problem`` and moment-matched on its per-row
    grids: ``({row: Gaussian}, {"<name>_s": seconds})``."""
    predictives, timings = {}, {}
    for row, arguments in method_variants(cfg.method).items():
        method = instantiate_method(cfg.method, **arguments)
        watch = Stopwatch()
        method.fit(problem, int(cfg.seed))
        density = method.predict(problem.x_new)
        timings[f"{method.name}_s"] = watch.elapsed()
        predictives[row] = Gaussian(density.mean, density.variance)
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


@takes(datasets=(ToySineData,), methods=(ConjugateMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit the BLR on one seed's training split; score the four predictives on its test split.

    Runs with ``threads`` torch threads (restored afterwards). Cells: rows
    ``Deterministic (plugin)``, ``Laplace/Exact``, ``ASSLA``, ``SSLA``; columns
    ``metrics.compute`` (rmse, nll, cov90, cov95), intervals by ``protocol.interval_z``.
    ``fitted`` keeps the evidence fit, sizes, and how far SSLA is from the exact predictive
    and ASSLA from the plug-in (the paper's printed identities).
    """
    with torch_threads(cfg.get("threads")):
        return _run(cfg)


def _run(cfg: DictConfig) -> TaskResult:
    dtype = resolve_dtype(cfg.protocol.dtype)
    dataset = instantiate(cfg.dataset)
    split = dataset.split(make_generator(cfg.seed))
    features = RBFFeatures.on_grid(dataset.x_min, dataset.x_max, cfg.task.n_centres,
                                   cfg.task.lengthscale)
    design, design_test = features(split.x_train).to(dtype), features(split.x_test).to(dtype)
    y_train, y_test = split.y_train.to(dtype), split.y_test.double()

    watch = Stopwatch()
    fit = evidence_fit(design, y_train, cfg.task.evidence_max_iter, cfg.task.evidence_tol)
    q = design.shape[1]
    model = LinearGaussianModel(
        fit.noise_variance, torch.zeros(q, dtype=dtype),
        torch.eye(q, dtype=dtype) / fit.prior_precision,
    )
    data = Data(y=y_train, x=design)
    theta_hat = model.fit(data, cfg.protocol.fit_objective)
    y_hat = (design_test @ theta_hat).double()
    post_mean, post_cov = model.posterior(data)
    design64 = design_test.double()
    exact_var = fit.noise_variance + ((design64 @ post_cov) * design64).sum(-1)
    plugin = Gaussian(y_hat, torch.full_like(y_hat, fit.noise_variance))
    exact = Gaussian(design64 @ post_mean, exact_var)
    fit_s = watch.elapsed()

    noise_sd = torch.full_like(y_hat, math.sqrt(fit.noise_variance))
    grid = candidate_grid(y_hat, noise_sd, cfg.task.grid_sd, cfg.task.grid_num).to(dtype)
    problem = ConjugateProblem("test", model, data, design_test, grid)
    predictives, timings = grid_predictives(cfg, problem)
    ssla, assla = predictives[SSLA], predictives[ASSLA]

    result = TaskResult()
    compute = list(cfg.metrics.compute)
    levels = tuple(int(name[3:]) for name in compute if name.startswith("cov"))
    for row, predictive in zip(ROWS, (plugin, exact, assla, ssla), strict=True):
        scores = regression_metrics(predictive, y_test, levels=levels,
                                    z=cfg.protocol.interval_z)
        for column in compute:
            result.add(row, column, scores[column])
    result.fitted = {
        "noise_variance": fit.noise_variance,
        "prior_precision": fit.prior_precision,
        "effective_parameters": fit.effective_parameters,
        "evidence_iterations": fit.iterations,
        "evidence_converged": fit.converged,
        "n_train": int(split.x_train.numel()),
        "n_test": int(split.x_test.numel()),
        "n_features": q,
        "grid_step_over_noise_sd": 2 * cfg.task.grid_sd / (cfg.task.grid_num - 1),
        "ssla_vs_exact": _max_gaps(ssla, exact),
        "assla_vs_plugin": _max_gaps(assla, plugin),
    }
    result.timings.update(fit_s=fit_s, **timings)
    return result
