"""Speed and accuracy of corrected SSLA's refit: one Gauss-Newton step vs converged damped
Newton vs a long full-batch L-BFGS refit, measured in one run on one network.

``python -m bench.benchmarks.ssla_refit [--out reports/ssla/refit-perf.md]`` trains a small
network of SSLA Table 2's kind (heteroscedastic toy, seed 42, a tanh MLP with fitted sigma),
then predicts at a few test inputs with (1) ``refit=gauss_newton`` (one undamped Gauss-Newton
step from theta-hat, the former corrected refit), (2) ``refit=newton`` (damped Newton from the
MAP of D to the MAP of D + (x, y)) and (3) the same SSLA formula with every (x, y) refitted by
``torch.optim.LBFGS`` (float64, strong Wolfe, asked for gradient norm 1e-8) from the same MAP of
D. It reports wall times, the convergence of each refit and the largest difference of each
normalised log predictive density from L-BFGS's on L-BFGS's grid. The default size takes well
under a minute; ``--width``/``--points``/``--grid`` enlarge it.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import torch

from bench.benchmarks.network_ssla import machine
from bench.datasets.toy import heteroscedastic_toy
from bench.harness.timing import Stopwatch
from bench.methods.ssla.network import NetworkSSLA
from bench.methods.ssla.refit_gauss_newton import GaussNewtonRefit
from bench.methods.ssla.refit_newton import (
    LogJointProblem,
    NewtonRefit,
    gradient_norm,
    lbfgs_refit,
)
from bench.methods.ssla.ssla_objectives import GaussianObjective
from bench.training.regression_network import train_map_mlp

LBFGS_GRAD_TOL = 1e-8
# Refits closer than this (Euclidean, in theta) reached the same minimum.
SAME_MINIMUM = 1e-4


def predict_timed(method: NetworkSSLA, splits, base, x: torch.Tensor):
    """Fit and predict once; (fit seconds, predict seconds, fit diagnostics, density)."""
    with Stopwatch() as fit:
        diagnostics = method.fit(splits, 42, base)
    with Stopwatch() as predict:
        density = method.predict(x)
    return fit.seconds, predict.seconds, diagnostics, density


def lbfgs_density(method: NetworkSSLA, x: torch.Tensor):
    """The converged method's SSLA formula with L-BFGS refits at its grid; (seconds, density,
    gradient norms)."""
    grid = method.last["grid"]
    m = grid.shape[-1]
    base = method.base
    problem = LogJointProblem(base.shape, method.x, method.y, base.noise_variance,
                              base.prior_precision, x.repeat_interleave(m, dim=0),
                              grid.reshape(-1))
    with Stopwatch() as watch:
        thetas = torch.stack([lbfgs_refit(problem, method.anchor, row, LBFGS_GRAD_TOL)
                              for row in range(len(problem.y_new))])
    norms = gradient_norm(problem, thetas)
    newton_refits = method._refits
    method._refits = lambda x, grid: thetas
    density = method.predict(x)
    method._refits = newton_refits
    return watch.seconds, density, norms, thetas


def max_log_difference(density, reference) -> float:
    """Largest |log p(y) - log p_ref(y)| over the reference's grid (one row per test input)."""
    gaps = [(density.log_prob(reference.grid[:, j]) - reference.log_density[:, j]).abs().max()
            for j in range(reference.grid.shape[-1])]
    return float(torch.stack(gaps).max())


def run(width: int, points: int, n_test: int, grid: int, sds: float) -> dict:
    """Every measurement of the report."""
    splits = heteroscedastic_toy(42, n_points=points)
    base = train_map_mlp(splits, seed=42, max_epochs=500, activation="tanh",
                         n_hidden=(width, width))
    x = splits.x_test[:n_test].double()
    common = dict(structure="dense", objective=GaussianObjective(), fine_grid_points=grid,
                  fine_grid_sds=sds)
    one_step = NetworkSSLA(refit=GaussNewtonRefit(), **common)
    converged = NetworkSSLA(refit=NewtonRefit(grad_tol=1e-8), **common)
    results = {"base": base, "n_train": len(splits.y_train), "pairs": n_test * grid}
    for name, method in (("one_step", one_step), ("converged", converged)):
        fit_s, predict_s, diagnostics, density = predict_timed(method, splits, base, x)
        results[name] = {"fit": fit_s, "predict": predict_s, "density": density}
    results["base_map"] = diagnostics
    results["summary"] = converged.refit.outcome.summary()
    newton_thetas = converged.refit.outcome.thetas
    newton_values = converged.last["log_values"].reshape(-1)
    seconds, reference, norms, thetas = lbfgs_density(converged, x)
    lbfgs_values = converged.last["log_values"].reshape(-1)
    results["lbfgs"] = {"seconds": seconds, "density": reference,
                        "grad_max": float(norms.max()), "grad_median": float(norms.median())}
    distance = (thetas - newton_thetas).norm(dim=-1)
    same = distance <= SAME_MINIMUM
    gap = (newton_values - lbfgs_values).abs()
    results["pairs_same"] = int(same.sum())
    results["gap_same"] = float(gap[same].max()) if same.any() else float("nan")
    results["distance_other"] = float(distance[~same].max()) if (~same).any() else 0.0
    for name in ("one_step", "converged"):
        results[name]["gap"] = max_log_difference(results[name]["density"], reference)
    return results


def render(argv: list[str], info: dict, args, results: dict) -> str:
    """The Markdown report."""
    base, summary, lbfgs = results["base"], results["summary"], results["lbfgs"]
    sigma2 = base.noise_variance
    rows = []
    for label, key in (("one Gauss-Newton step (refit=gauss_newton)", "one_step"),
                       ("damped Newton to the MAP (refit=newton)", "converged")):
        r = results[key]
        sd = r["density"].variance.sqrt()
        rows.append(f"| {label} | {r['fit']:.3g} | {r['predict']:.3g} | {r['gap']:.2e} | "
                    f"{float(sd.min()):.4f} - {float(sd.max()):.4f} |")
    sd = lbfgs["density"].variance.sqrt()
    rows.append(f"| L-BFGS refits (same formula and grid as refit=newton) | "
                f"{results['converged']['fit']:.3g} (MAP of D) | {lbfgs['seconds']:.3g} | 0 | "
                f"{float(sd.min()):.4f} - {float(sd.max()):.4f} |")
    return "\n".join([
        "# SSLA refit: one step vs converged vs L-BFGS", "",
        f"- Command: `{' '.join(['python -m bench.benchmarks.ssla_refit', *argv])}`",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- Git: {info['sha']}",
        f"- Machine: {info['cpu']}; torch threads {info['threads']}; torch {info['torch']}; "
        f"Python {info['python']}; load average at start {info['load']} (shared machine: "
        "timings are noisy)",
        f"- Network: heteroscedastic toy, seed 42, {results['n_train']} training points, MLP "
        f"{base.shape.widths} tanh (p = {base.shape.n_params}), MAP with fitted sigma^2 = "
        f"{sigma2:.4f}, tau = {base.prior_precision}; float64. {args.n_test} test inputs x "
        f"{args.grid} grid values (±{args.sds:g} predictive sd) = {results['pairs']} (x, y) "
        "pairs, every one refitted by each method; corrected protocol, dense curvature.",
        "", "| refit | fit (s) | predict (s) | max abs log-PPD difference from L-BFGS (nats) "
        "| predictive sd (min - max) |", "|---|---|---|---|---|", *rows, "",
        f"Converged refit: MAP of D from theta-hat in {results['base_map']['base_map_steps']} "
        f"Newton steps (gradient norm {results['base_map']['base_map_grad_norm']:.2e}, log "
        f"joint gain {results['base_map']['base_map_log_joint_gain']:.3f} nats; that is the "
        "fit time); refits: gradient norm max "
        f"{summary['refit_grad_norm_max']:.2e}, median {summary['refit_grad_norm_median']:.2e}; "
        f"steps max {summary['refit_steps_max']:.0f}, median "
        f"{summary['refit_steps_median']:.0f}; not converged (tolerance 1e-8): "
        f"{summary['refit_not_converged']:.0f}. L-BFGS (asked for 1e-8; torch's test is on the "
        f"largest gradient component): gradient norm max {lbfgs['grad_max']:.2e}, median "
        f"{lbfgs['grad_median']:.2e}. Newton and L-BFGS reached the same minimum (|delta "
        f"theta| <= {SAME_MINIMUM:g}) at {results['pairs_same']} of {results['pairs']} pairs, "
        f"where their log-PPD values (before normalisation, which the other pairs shift) "
        f"differ by at most {results['gap_same']:.2e} nats; at "
        f"the others they stopped at different local minima of the same objective (|delta "
        f"theta| up to {results['distance_other']:.3g}), both with a small gradient: the MAP "
        "of D + (x, y) is not unique away from the centre of the grid, and the table's "
        "difference for the converged refit comes from there. The one-step refit's density "
        "lives on its own grid (anchored at theta-hat); it is compared with L-BFGS's by "
        "interpolating its log density at L-BFGS's grid values. "
        f"sigma = {sigma2 ** 0.5:.4f}: a predictive sd below it is narrower than the noise "
        "alone.", "",
    ])


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="reports/ssla/refit-perf.md")
    parser.add_argument("--width", type=int, default=8, help="hidden units per layer")
    parser.add_argument("--points", type=int, default=50, help="toy data points (80% train)")
    parser.add_argument("--n-test", type=int, default=2, help="test inputs")
    parser.add_argument("--grid", type=int, default=11, help="grid values per test input")
    parser.add_argument("--sds", type=float, default=3.0, help="grid half-width in sd")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    torch.set_num_threads(1)
    info = machine()
    results = run(args.width, args.points, args.n_test, args.grid, args.sds)
    report = render(argv, info, args, results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report)
    print(report)


if __name__ == "__main__":
    main()
