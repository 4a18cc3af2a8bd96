"""Timing of Greedy-Laplace (Algorithm 1) against re-inverting at every step.

``python -m bench.subnet.perf [--p 250 500 1000 2000] [--k 10 20 40 80]`` prints a Markdown
table and the fitted scaling exponents. The precision is a GGN-like ``J^T J + I`` with ``J``
``[p/2, p]`` standard normal (float64). The naive baseline is skipped once its predicted time
(the last measurement at this ``k`` scaled by ``p^3``) passes ``naive_budget_s``.
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from torch import Tensor

from bench.rng import make_generator
from bench.subnet.selection import (
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


def best_time(fn, repeats: int) -> tuple[float, object]:
    """(best wall seconds over ``repeats`` calls, last result)."""
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


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
                row[key], indices = best_time(lambda s=selector, m=omega, k=k: s(m, k), repeats)
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


def main(argv=None) -> None:
    """Print the timing table and exponents as Markdown."""
    import pandas as pd

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--p", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--k", type=int, nargs="+", default=[10, 20, 40, 80])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--naive-budget-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    rows = greedy_timing(args.p, args.k, args.repeats, args.seed, args.naive_budget_s)
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".4g"))
    exponents = [{"implementation": key, **scaling_exponents(rows, key)} for key in TIMED]
    print()
    print(pd.DataFrame(exponents).to_markdown(index=False, floatfmt=".3g"))


if __name__ == "__main__":
    main()
