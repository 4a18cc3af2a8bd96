"""Timing of Greedy-Laplace (Algorithm 1) against re-inverting at every step.

``python -m bench.benchmarks.subset_selection_speed [--p 250 500 1000 2000] [--k 10 20 40 80]
[--out FILE]`` prints
(or writes to ``FILE``, e.g. ``reports/subnet/perf.md`` via ``make bench-perf-subnet``) a
Markdown report: the timing table and the fitted scaling exponents beside the complexities
claimed (Algorithm 1: ``O(k p^2)``; the naive greedy: ``O(p^3)`` per step). The precision is
a GGN-like ``J^T J + I`` with ``J`` ``[p/2, p]`` standard normal (float64). The naive baseline
is skipped once its predicted time (the last measurement at this ``k`` scaled by ``p^3``)
passes ``naive_budget_s``.
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import Tensor

from bench.harness.rng import make_generator
from bench.harness.timing import Stopwatch, timed
from bench.methods.laplace.subset_selection import (
    greedy_subnet_indices,
    naive_greedy_subnet_indices,
    partial_cholesky_greedy_subnet_indices,
)

TIMED = {
    "greedy_s": greedy_subnet_indices,
    "partial_cholesky_s": partial_cholesky_greedy_subnet_indices,
    "naive_s": naive_greedy_subnet_indices,
}


def random_precision(p: int, generator: torch.Generator) -> Tensor:
    """``J^T J + I`` with ``J`` ``[max(1, p // 2), p]`` i.i.d. N(0, 1) (float64)."""
    jac = torch.randn(max(1, p // 2), p, generator=generator, dtype=torch.float64)
    return jac.T @ jac + torch.eye(p, dtype=torch.float64)


def greedy_timing(p_values, k_values, repeats: int = 3, seed: int = 0,
                  naive_budget_s: float = 1.0) -> list[dict]:
    """One row per ``(p, k <= p)``: seconds of each implementation, the naive/greedy ratio and
    whether all implementations chose the same indices (``naive_s`` is None when skipped)."""
    generator = make_generator(seed)
    last_naive: dict[int, tuple[int, float]] = {}
    rows = []
    for p in sorted(p_values):
        omega = random_precision(p, generator)
        for k in sorted(k for k in k_values if k <= p):
            row: dict = {"p": p, "k": k}
            chosen = []
            for key, selector in TIMED.items():
                if key == "naive_s" and k in last_naive:
                    p_prev, t_prev = last_naive[k]
                    if t_prev * (p / p_prev) ** 3 > naive_budget_s:
                        row[key] = None
                        continue
                row[key], indices = timed(lambda s=selector, m=omega, k=k: s(m, k), repeats)
                chosen.append(indices)
                if key == "naive_s":
                    last_naive[k] = (p, row[key])
            row["naive_over_greedy"] = (row["naive_s"] / row["greedy_s"]
                                        if row["naive_s"] is not None else None)
            row["same_indices"] = all(torch.equal(chosen[0], c) for c in chosen[1:])
            rows.append(row)
    return rows


def fit_exponent(sizes, seconds) -> float:
    """Least-squares slope of ``log(seconds)`` against ``log(sizes)``."""
    x = torch.log(torch.tensor(sizes, dtype=torch.float64))
    y = torch.log(torch.tensor(seconds, dtype=torch.float64))
    design = torch.stack([x, torch.ones_like(x)], dim=1)
    return float(torch.linalg.lstsq(design, y.unsqueeze(1)).solution[0, 0])


def scaling_exponents(rows: list[dict], key: str) -> dict[str, float]:
    """Exponent of ``key``'s time vs ``p`` at the largest ``k`` measured at >= 2 values of ``p``,
    and vs ``k`` at the largest ``p`` measured at >= 2 values of ``k``."""
    timed = [r for r in rows if r.get(key) is not None]
    out = {}
    for fixed, varied in (("k", "p"), ("p", "k")):
        groups: dict[int, list[dict]] = {}
        for row in timed:
            groups.setdefault(row[fixed], []).append(row)
        candidates = [v for v, g in groups.items() if len(g) >= 2]
        if candidates:
            value = max(candidates)
            group = groups[value]
            out[f"vs_{varied}_at_{fixed}={value}"] = fit_exponent(
                [r[varied] for r in group], [r[key] for r in group])
    return out


CLAIMED_EXPONENTS = {
    "greedy_s": ("O(k p^2) (Algorithm 1, Section 3)", 2.0, 1.0),
    "partial_cholesky_s": ("O(p k^2) (lazy Schur complements)", 1.0, 2.0),
    "naive_s": ("O(k p^3) (re-inverting at every step)", 3.0, 1.0),
}


def markdown_report(rows: list[dict], args: argparse.Namespace, wall_s: float,
                    load_average: float) -> str:
    """The timing table, the fitted exponents beside the claimed ones, and how it was run."""
    import pandas as pd

    exponents = []
    for key, (claim, p_exponent, k_exponent) in CLAIMED_EXPONENTS.items():
        fitted = scaling_exponents(rows, key)
        line = {"implementation": key.removesuffix("_s"), "claimed": claim}
        for name, value in fitted.items():
            expected = p_exponent if name.startswith("vs_p") else k_exponent
            line[name] = f"{value:.2f} (claimed {expected:g})"
        exponents.append(line)
    timing = pd.DataFrame(rows).to_markdown(index=False, floatfmt=".4g")
    return "\n".join([
        "# Subnetwork Laplace: Greedy-Laplace selection time", "",
        f"`python -m bench.benchmarks.subset_selection_speed --p {' '.join(map(str, args.p))} --k "
        f"{' '.join(map(str, args.k))} --repeats {args.repeats} --threads {args.threads}` "
        f"(torch {torch.__version__}, {args.threads} thread(s), float64, median of "
        f"{args.repeats} after one warm-up call; {wall_s:.0f} s in all; 1-minute load average "
        f"{load_average:.1f} "
        f"on {os.cpu_count()} cores at the start, so absolute times include contention).", "",
        "Precision: `J^T J + I` with `J` `[p/2, p]` standard normal. `greedy` is Algorithm 1 "
        "with the Step-5 rank-one Schur downdate; `partial_cholesky` computes the same "
        "selection lazily; `naive` re-inverts the remaining block's marginal covariance at "
        "every step (the O(p^3)-per-step comparison; skipped, empty, once its predicted time "
        f"passes {args.naive_budget_s:g} s). `same_indices`: all implementations chose the "
        "same subset.", "",
        "## Timings (seconds)", "", timing, "",
        "## Fitted exponents (log-log least squares)", "",
        pd.DataFrame(exponents).fillna("—").to_markdown(index=False), "",
        "Exponents at small sizes are pulled below the asymptotic ones by fixed per-step "
        "overheads (Python loop, kernel launches); the ratio column naive_over_greedy is the "
        "direct comparison.", "",
    ])


def main(argv=None) -> None:
    """Print (or write to ``--out``) the timing report as Markdown."""
    from pathlib import Path

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--p", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--k", type=int, nargs="+", default=[10, 20, 40, 80])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--naive-budget-s", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_average = os.getloadavg()[0]
    with Stopwatch() as watch:
        rows = greedy_timing(args.p, args.k, args.repeats, args.seed, args.naive_budget_s)
    text = markdown_report(rows, args, watch.seconds, load_average)
    if args.out is None:
        print(text)
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
