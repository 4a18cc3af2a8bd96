"""Speed of the fast HMC sampler against pyro's HMC kernel, same chain.

``python -m bench.benchmarks.hmc_sampler_speed [--transitions 300] [--burn 50] [--repeats 3]
[--quick] [--out FILE]`` prints (or writes to ``FILE``) a Markdown report: SSLA Table 2's HMC
baseline (:class:`bench.methods.baselines.hmc.HMCMethod` with the authors' tuned settings: the
1-50-50-1 tanh MLP, step size 4.149e-4, 14 leapfrog steps, diagonal inverse mass) on the
heteroscedastic toy (seed 42), fitted with ``method.sampler=pyro`` (pyro's ``HMC`` under
``MCMC``, the oracle) and ``method.sampler=fast`` (:mod:`bench.methods.baselines.hmc_replay`) in the
same process. Each is timed with :func:`bench.harness.timing.timed` (median of ``--repeats``
after one untimed warm-up call) over the whole ``fit`` (sampling plus diagnostics), and the
kept samples of the two are checked to be equal (``torch.equal``). ``--quick`` runs 6
transitions (CI smoke); its ratio means nothing.
"""

from __future__ import annotations

import argparse
import sys

import torch

from bench.benchmarks.network_ssla import machine, publish
from bench.datasets.toy import heteroscedastic_toy
from bench.harness.timing import timed
from bench.methods.baselines.hmc import HMCMethod

SAMPLERS = ("pyro", "fast")


def bench_samplers(transitions: int, burn: int, repeats: int) -> dict:
    """Both samplers on Table 2's toy: seconds per fit, and whether the samples are equal."""
    splits = heteroscedastic_toy(42)
    out = {}
    for sampler in SAMPLERS:
        method = HMCMethod(sampler=sampler, num_samples=transitions, burn=burn)
        seconds, diagnostics = timed(lambda method=method: method.fit(splits, seed=0), repeats)
        out[sampler] = (seconds, method.samples, diagnostics)
    (slow, oracle, oracle_diag), (fast, samples, diag) = out["pyro"], out["fast"]
    return {"pyro": slow, "fast": fast, "ratio": slow / fast,
            "equal": torch.equal(samples, oracle) and diag["acceptance_rate"]
            == oracle_diag["acceptance_rate"],
            "acceptance_rate": diag["acceptance_rate"], "kept": diag["num_kept"]}


def render(args: list[str], info: dict, quick: bool, cfg: dict, row: dict) -> str:
    """The Markdown report."""
    return "\n".join([
        "# Speed benchmark: HMC baseline, fast sampler vs pyro's HMC kernel", "",
        f"- Command: `{' '.join(['python -m bench.benchmarks.hmc_sampler_speed', *args])}`",
        f"- Git: {info['sha']}",
        f"- Machine: {info['cpu']}; torch threads {info['threads']}; torch {info['torch']}; "
        f"load average at start {info['load']} (shared machine: timings are noisy)",
        f"- Run: SSLA Table 2's HMC (1-50-50-1 tanh MLP, the authors' tuned step size, 14 "
        f"leapfrog steps), heteroscedastic toy seed 42, {cfg['transitions']} transitions of "
        f"which {cfg['burn']} burn-in; whole fit (sampling and diagnostics) timed as the median "
        f"of {cfg['repeats']} calls after one warm-up, both samplers in this run"
        + (" — QUICK smoke run, ratio not meaningful" if quick else ""),
        "", "| pyro (s) | fast (s) | ratio | kept | acceptance | same samples |",
        "|---|---|---|---|---|---|",
        f"| {row['pyro']:.3g} | {row['fast']:.3g} | {row['ratio']:.2f}x | {row['kept']} | "
        f"{row['acceptance_rate']:.3f} | {'yes' if row['equal'] else 'NO'} |", ""])


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transitions", type=int, default=300, help="HMC transitions per fit")
    parser.add_argument("--burn", type=int, default=50, help="burn-in transitions")
    parser.add_argument("--repeats", type=int, default=3, help="timed fits per sampler")
    parser.add_argument("--quick", action="store_true", help="6 transitions (CI smoke)")
    parser.add_argument("--out", help="Markdown report path (printed either way)")
    args = parser.parse_args(argv)
    cfg = ({"transitions": 6, "burn": 2, "repeats": 1} if args.quick else
           {"transitions": args.transitions, "burn": args.burn, "repeats": args.repeats})
    info = machine()
    row = bench_samplers(**cfg)
    report = render(sys.argv[1:] if argv is None else argv, info, args.quick, cfg, row)
    publish(report, args.out)


if __name__ == "__main__":
    main()
