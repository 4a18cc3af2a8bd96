"""Speed benchmark of the network SSLA/ASSLA code: three ratios on one trained model.

``python -m bench.perf [--quick] [--out reports/perf.md]`` trains one corrected-protocol MAP
network (1-50-50-1 ReLU MLP, p = 2701) on the heteroscedastic toy data (seed 42) and times,
on that same network: (1) ASSLA against the naive reference that builds and Cholesky-factors
the dense p x p augmented Fisher for every (test x, grid y); (2) ASSLA's predictive against
laplace-torch's full-GGN GLM predictive; (3) the SSLA one-step Gauss-Newton refit
(``refit=gauss_newton``) against the SGD refit. The converged refit (``refit=newton``) is
compared in :mod:`bench.benchmarks.ssla_refit`.
It also times one paper-protocol SSLA (K-FAC) run for context. Each repeated timing is the
median of a few calls after an untimed warm-up call, with CUDA synchronised before every clock
read (:mod:`bench.harness.timing`); both sides of every ratio are measured the same way in the
same run. The report goes to Markdown. ``--quick`` shrinks every size (CI smoke); its ratios
are not meaningful.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from bench.curvature.flat import FlatBackend
from bench.curvature.structures import ggn
from bench.datasets.toy import heteroscedastic_toy
from bench.harness.timing import Stopwatch, timed
from bench.methods.ssla.network import NetworkASSLA, NetworkSSLA
from bench.methods.ssla.refit_gauss_newton import GaussNewtonRefit
from bench.methods.ssla.refit_sgd import SGDRefit
from bench.methods.ssla.ssla_objectives import GaussianObjective
from bench.training.regression_network import train_map_mlp, train_paper_mlp

FULL = {"n_test": 25, "ref_points": 3, "ref_grid": 2, "sgd_points": 5, "repeats": 3,
        "sgd_repeats": 2, "la_fits": 2, "paper_points": 25, "paper_grid": 20,
        "max_epochs": 2000}
QUICK = {"n_test": 4, "ref_points": 1, "ref_grid": 2, "sgd_points": 1, "repeats": 1,
         "sgd_repeats": 1, "la_fits": 1, "paper_points": 1, "paper_grid": 4, "max_epochs": 20}
PAPER_LR = 0.04016791033073118


def reference_increment(base, x_train: torch.Tensor, x_new: torch.Tensor,
                        logdet_h: torch.Tensor) -> torch.Tensor:
    """Naive curvature increment of one (x, y): -0.5 [logdet(H_aug) - logdet(H)], with the
    dense augmented Fisher ``J^T J / sigma^2 + tau I`` over D + {x} rebuilt and factorised."""
    return -0.5 * (dense_precision(base, torch.cat([x_train, x_new.reshape(1, -1)])).logdet()
                   - logdet_h)


def dense_precision(base, x: torch.Tensor):
    """The dense ``J^T J / sigma^2 + tau I`` of the base network over inputs ``x``."""
    dense = ggn(FlatBackend(base.shape, base.theta), x, "dense")
    return dense.scaled(1 / base.noise_variance, base.prior_precision)


def bench_reference(splits, base, x_test, cfg) -> dict:
    """(1) ASSLA fit + predict over N x grid vs the naive per-(x, y) dense Cholesky."""
    assla = NetworkASSLA(structure="dense", objective=GaussianObjective())
    t_fit, _ = timed(lambda: assla.fit(splits, 42, base), cfg["repeats"])
    t_pred, _ = timed(lambda: assla.predict(x_test), cfg["repeats"])
    n, m = assla.last["log_values"].shape
    x_train = splits.x_train.to(base.theta.dtype)
    xs = x_test.to(base.theta.dtype)[: cfg["ref_points"]]

    t_base, logdet_h = timed(lambda: dense_precision(base, x_train).logdet(), cfg["repeats"])
    per_point, ref = [], []
    for x in xs:
        for _ in range(cfg["ref_grid"]):  # the reference redoes everything for every grid y
            seconds, value = timed(lambda x=x: reference_increment(base, x_train, x, logdet_h),
                                   cfg["repeats"])
            per_point.append(seconds)
            ref.append(float(value))
    assla_inc = torch.tensor(assla.last["curvature_increment"][: len(xs)], dtype=torch.float64)
    ref_inc = torch.tensor(ref, dtype=torch.float64).reshape(len(xs), cfg["ref_grid"])
    rel = ((ref_inc - assla_inc.unsqueeze(-1)).abs() / assla_inc.abs().unsqueeze(-1)).max()
    t_point = sum(per_point) / len(per_point)
    return {"assla_fit": t_fit, "assla_predict": t_pred, "n": n, "m": m, "ref_base": t_base,
            "ref_point": t_point, "ref_subset": len(per_point),
            "ref_total": t_base + n * m * t_point,
            "ref_rel_err": float(rel), "assla_total": t_fit + t_pred}


def bench_la(splits, base, x_test, assla_predict: float, cfg) -> dict:
    """(2) laplace-torch full-GGN GLM predictive vs ASSLA; SSLA-Newton variance vs LA's."""
    from laplace import Laplace

    dtype = base.theta.dtype
    loader = DataLoader(TensorDataset(splits.x_train.to(dtype), splits.y_train.to(dtype)),
                        batch_size=len(splits.y_train))
    xs = x_test.to(dtype)
    fits, colds, warms = [], [], []
    for _ in range(cfg["la_fits"]):
        la = Laplace(base.module(), "regression", subset_of_weights="all",
                     hessian_structure="full", sigma_noise=math.sqrt(base.noise_variance),
                     prior_precision=base.prior_precision)
        with Stopwatch() as fit:
            la.fit(loader)
        with Stopwatch() as cold:
            la(xs, pred_type="glm")  # the first predictive also forms the posterior covariance
        fits.append(fit.seconds)
        colds.append(cold.seconds)
        seconds, (_, f_var) = timed(lambda la=la: la(xs, pred_type="glm"), cfg["repeats"],
                                    warmup=0)  # the cold call above was the warm-up
        warms.append(seconds)
    la_var = f_var.reshape(-1).double() + base.noise_variance
    newton = NetworkSSLA(structure="dense", objective=GaussianObjective(),
                         refit=GaussNewtonRefit())
    newton.fit(splits, 42, base)
    t_newton, density = timed(lambda: newton.predict(xs), cfg["repeats"])
    rel = (density.variance - la_var).abs() / la_var
    return {"la_fit": min(fits), "la_cold": min(colds), "la_warm": min(warms),
            "la_dtype": str(next(la.model.parameters()).dtype), "var_rel_max": float(rel.max()),
            "var_rel_median": float(rel.median()), "newton_all": t_newton,
            "ratio": assla_predict / min(warms)}


def bench_refits(splits, base, x_test, cfg) -> dict:
    """(3) SSLA Newton vs SGD refit (dense, corrected) on the same test points."""
    xs = x_test[: cfg["sgd_points"]]
    out = {}
    refits = {"newton": (GaussNewtonRefit(), cfg["repeats"]),
              "sgd": (SGDRefit(lr=1e-3), cfg["sgd_repeats"])}
    for label, (refit, repeats) in refits.items():
        model = NetworkSSLA(structure="dense", objective=GaussianObjective(), refit=refit)
        model.fit(splits, 42, base)
        out[label], out[label + "_density"] = timed(lambda m=model: m.predict(xs), repeats)
    a, b = out["newton_density"], out["sgd_density"]
    diff = (a.log_density - b.log_density).abs()
    steps = torch.linspace(-1, 1, a.grid.shape[-1]) * model.fine_grid_sds
    central = diff[:, steps.abs() <= 2]
    return {"points": len(xs), "m": a.grid.shape[-1], "newton": out["newton"],
            "sgd": out["sgd"], "mean_abs": float(diff.mean()), "max_abs": float(diff.max()),
            "central_mean": float(central.mean()), "central_max": float(central.max()),
            "ratio": out["sgd"] / out["newton"]}


def bench_paper(splits, cfg) -> dict:
    """One paper-protocol K-FAC SSLA run (authors' base MLP), timed once."""
    with Stopwatch() as train:
        base = train_paper_mlp(splits, seed=42, lr=PAPER_LR, batch_size=64)
    model = NetworkSSLA(structure="kfac", refit=SGDRefit(lr=0.0402), grid_points=cfg["paper_grid"])
    model.fit(splits, 42, base)
    with Stopwatch() as predict:
        model.predict(splits.x_test[: cfg["paper_points"]])
    return {"train": train.seconds, "predict": predict.seconds, "points": cfg["paper_points"],
            "grid": cfg["paper_grid"]}


def publish(report: str, out: str | Path | None) -> None:
    """Print a benchmark's Markdown report and, given a path, write it there too."""
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(report)
    print(report)


def machine() -> dict:
    """CPU, threads, versions and the commit, for the report header."""
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True,
                           text=True).stdout.strip()
    return {"sha": sha + (" (uncommitted changes in tree)" if dirty else ""),
            "cpu": f"{os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
                   f"{platform.processor() or platform.machine()}",
            "threads": torch.get_num_threads(), "torch": torch.__version__,
            "laplace": version("laplace-torch"), "python": platform.python_version(),
            "load": "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())}


def verdict(ok: bool) -> str:
    """PASS or MISS."""
    return "PASS" if ok else "MISS"


def render(args, quick, info, cfg, base, ref, la, refit, paper) -> str:
    """The Markdown report."""
    per_sgd, per_newton = refit["sgd"] / refit["points"], la["newton_all"] / ref["n"]
    same, ratio3 = refit["ratio"], per_sgd / per_newton
    ratio1 = ref["ref_total"] / ref["assla_total"]
    rows = [
        ("ASSLA vs reference (dense Cholesky per x, y)", ref["assla_total"], ref["ref_total"],
         f"{ratio1:.0f}x", ">= 100x", ratio1 >= 100),
        ("ASSLA vs LA GLM predictive", ref["assla_predict"], la["la_warm"],
         f"{la['ratio']:.2f}x", "<= 2x", la["ratio"] <= 2),
        ("Newton vs SGD refit (per test point)", per_newton, per_sgd,
         f"{ratio3:.0f}x (same points: {same:.0f}x)", ">= 50x", ratio3 >= 50),
    ]
    lines = [
        "# Speed benchmark: network SSLA / ASSLA", "",
        f"- Command: `{' '.join(['python -m bench.perf', *args])}`",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- Git: {info['sha']}",
        f"- Machine: {info['cpu']}; torch threads {info['threads']}; torch {info['torch']}; "
        f"laplace-torch {info['laplace']}; Python {info['python']}; load average at start "
        f"{info['load']} (shared machine: timings are noisy)",
        f"- Sizes: {cfg}" + (" — QUICK smoke run, ratios not meaningful" if quick else ""),
        f"- Model: heteroscedastic toy (seed 42), corrected-protocol MAP MLP "
        f"{base.shape.widths}, p = {base.shape.n_params}, sigma^2 = {base.noise_variance:.4f}, "
        f"tau = {base.prior_precision}, float64, trained in "
        f"{base.diagnostics['train_s']:.1f} s. Every repeated timing is the median of the repeats "
        "above after one untimed warm-up call (LA's first fit and first predictive are timed "
        "once, cold); CUDA is synchronised before every clock read.",
        "", "| Comparison | fast (s) | baseline (s) | ratio | target | result |",
        "|---|---|---|---|---|---|",
        *[f"| {a} | {b:.4g} | {c:.4g} | {d} | {e} | {verdict(f)} |" for a, b, c, d, e, f in rows],
        "", "## 1. ASSLA vs the naive reference", "",
        f"ASSLA (dense, corrected) over {ref['n']} test points x {ref['m']} grid values: fit "
        f"{ref['assla_fit']:.3f} s + predict {ref['assla_predict']:.3f} s = "
        f"{ref['assla_total']:.3f} s. Reference: logdet(H) once {ref['ref_base']:.3f} s, then "
        f"{ref['ref_point']:.3f} s per (x, y) (mean over a subset of {ref['ref_subset']} = "
        f"{cfg['ref_points']} x {cfg['ref_grid']} timed points), **extrapolated linearly** to "
        f"{ref['n'] * ref['m']} points: {ref['ref_total']:.1f} s. Max relative difference of the "
        f"reference increments from ASSLA's on the subset: {ref['ref_rel_err']:.2e}.",
        "", "## 2. ASSLA vs laplace-torch GLM (full GGN, all weights)", "",
        f"laplace-torch ({la['la_dtype']}, D in one batch, sigma_noise = sqrt(sigma^2), same "
        f"tau, no tuning): fit "
        f"{la['la_fit']:.3f} s; first GLM predictive (includes the posterior covariance) "
        f"{la['la_cold']:.3f} s; later predictives {la['la_warm']:.4f} s. ASSLA: fit "
        f"{ref['assla_fit']:.3f} s, predict {ref['assla_predict']:.4f} s (ratio uses the two "
        f"predictives after fit). SSLA-Newton (dense, corrected; predict {la['newton_all']:.3f} s)"
        f" quadrature variance vs LA's f_var + sigma^2: max relative difference "
        f"{la['var_rel_max']:.3g}, median {la['var_rel_median']:.3g}.",
        "", "## 3. SSLA Newton vs SGD refit", "",
        f"Dense, corrected protocol, x {refit['m']} grid values per test point. Newton over all "
        f"{ref['n']} test points {la['newton_all']:.3f} s ({per_newton:.4f} s per point; the "
        f"table's ratio); SGD (lr 1e-3) on the first {refit['points']} {refit['sgd']:.2f} s "
        f"({per_sgd:.3f} s per point); Newton on those same points {refit['newton']:.3f} s "
        f"(ratio {same:.1f}x: less batching for Newton). Normalised log-PPD "
        f"|Newton - SGD|: mean {refit['mean_abs']:.4g}, max {refit['max_abs']:.4g} over the "
        f"whole +-8 sd grid; within +-2 sd: mean {refit['central_mean']:.4g}, max "
        f"{refit['central_max']:.4g}.",
        "", "## Context: one paper-protocol SSLA run", "",
        f"K-FAC SSLA, paper protocol (authors' base MLP, trained in {paper['train']:.1f} s; "
        f"refit lr 0.0402) over {paper['points']} test points x {paper['grid']} grid values: "
        f"{paper['predict']:.1f} s (one run). For context, not a ratio: the authors' code took "
        "about 6-9 minutes per representation for the 25 x 20 grid (reproduction notes §12).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run every measurement and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke)")
    parser.add_argument("--out", default="reports/perf.md", help="Markdown report path")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    cfg = QUICK if args.quick else FULL
    info = machine()
    splits = heteroscedastic_toy(42)
    base = train_map_mlp(splits, seed=42, max_epochs=cfg["max_epochs"])
    x_test = splits.x_test[: cfg["n_test"]]
    ref = bench_reference(splits, base, x_test, cfg)
    la = bench_la(splits, base, x_test, ref["assla_predict"], cfg)
    refit = bench_refits(splits, base, x_test, cfg)
    paper = bench_paper(splits, cfg)
    publish(render(argv, args.quick, info, cfg, base, ref, la, refit, paper), args.out)


if __name__ == "__main__":
    main()
