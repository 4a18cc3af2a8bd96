"""Speed of the fast loops against the authors' Lightning Trainer, same training: the paper MLP
and the VI baselines.

``python -m bench.benchmarks.paper_training [--uci real_estate ...] [--repeats 1] [--quick]
[--out FILE]`` prints (or writes to ``FILE``) a Markdown report: the SSLA paper's base MLP
(:func:`bench.training.regression_network.train_paper_mlp`, seed 42, the authors' tuned lr and
batch size, 500 epochs at most, early stopping with patience 20) trained on Table 2's toy and
on each ``--uci`` data set (Table 4's paper protocol) by both loops in the same run:
``base.loop=lightning`` (the Trainer, the oracle) and ``base.loop=fast``. Each is timed with
:func:`bench.harness.timing.timed` (median of ``--repeats`` after one untimed warm-up of both
loops on the toy, which pays the imports) and checked to give the same weights
(``torch.equal``). Two more rows time Table 2's VI baselines the same way
(:class:`bench.methods.baselines.vi.AlphaVIMethod` with the paper protocol's Tanh and
:class:`~bench.methods.baselines.vi.MFVIMethod`, the authors' tuned values, seed 42):
``method.loop=lightning`` against ``method.loop=fast``, checked to give the same trained
parameters and buffers. ``--quick`` trains 3 epochs at most (CI smoke); its ratios mean nothing.
"""

from __future__ import annotations

import argparse
import sys

import torch

from bench.benchmarks.network_ssla import machine, publish
from bench.harness.timing import timed
from bench.harness.tuned import load_tuned
from bench.methods.baselines.vi import AlphaVIMethod, MFVIMethod
from bench.training.regression_network import train_paper_mlp

UCI_TUNED = {"auto_mpg": "auto_mpg", "liver": "liver_disorders", "concrete": "concrete",
             "wine": "wine_quality", "bike": "bike_sharing", "airfoil": "airfoil",
             "daily_demand": "daily_demand", "real_estate": "real_estate"}


def problems(uci: list[str]) -> list[tuple[str, object, dict]]:
    """(label, splits factory, tuned lr and batch size) of the toy and each UCI set."""
    from bench.datasets.toy import heteroscedastic_toy
    from bench.datasets.uci import uci_splits

    out = [("Table 2 toy", lambda: heteroscedastic_toy(42),
            dict(load_tuned("paper", "heteroscedastic/mlp")))]
    for name in uci:
        out.append((f"UCI {name}", lambda name=name: uci_splits(name, "paper", 42),
                    dict(load_tuned("paper", f"uci/mlp_{UCI_TUNED[name]}"))))
    return out


def bench_problem(make_splits, tuned: dict, max_epochs: int, repeats: int) -> dict:
    """Both loops on one problem: seconds, epochs, and whether the weights are equal."""
    out = {}
    for loop in ("lightning", "fast"):
        seconds, base = timed(
            lambda loop=loop: train_paper_mlp(make_splits(), seed=42, loop=loop,
                                              max_epochs=max_epochs, **tuned),
            repeats, warmup=0)
        out[loop] = (seconds, base)
    (slow, oracle), (fast, base) = out["lightning"], out["fast"]
    return {"lightning": slow, "fast": fast, "ratio": slow / fast,
            "epochs": base.diagnostics["epochs"], "epochs_oracle": oracle.diagnostics["epochs"],
            "equal": torch.equal(base.theta, oracle.theta), "tuned": tuned}


def bench_vi(method_cls, max_epochs: int, repeats: int) -> dict:
    """Both loops of one VI baseline on Table 2's toy (seed 42), as :func:`bench_problem`."""
    from bench.datasets.toy import heteroscedastic_toy

    out = {}
    for loop in ("lightning", "fast"):
        method = method_cls(loop=loop, max_epochs=max_epochs)
        seconds, diagnostics = timed(lambda method=method: method.fit(heteroscedastic_toy(42),
                                                                      seed=42),
                                     repeats, warmup=0)
        out[loop] = (seconds, diagnostics, method.module.state_dict())
    (slow, oracle, oracle_state), (fast, diagnostics, state) = out["lightning"], out["fast"]
    return {"lightning": slow, "fast": fast, "ratio": slow / fast,
            "epochs": diagnostics["epochs"], "epochs_oracle": oracle["epochs"],
            "equal": all(torch.equal(state[name], value) for name, value in oracle_state.items()),
            "tuned": {"lr": method.lr, "batch_size": method.batch_size}}


def render(args: list[str], info: dict, quick: bool, rows: list[tuple[str, dict]]) -> str:
    """The Markdown report."""
    lines = [
        "# Speed benchmark: paper MLP and VI training, fast loop vs the Lightning Trainer", "",
        f"- Command: `{' '.join(['python -m bench.benchmarks.paper_training', *args])}`",
        f"- Git: {info['sha']}",
        f"- Machine: {info['cpu']}; torch threads {info['threads']}; torch {info['torch']}; "
        f"load average at start {info['load']} (shared machine: timings are noisy)",
        "- Training: seed 42, the authors' tuned lr and batch size, MSE (VI rows: their ELBO "
        "/ alpha-divergence loss and tuned values), Adam, early stopping "
        "on val_loss (patience 20), last epoch kept; both loops in this run, each timed "
        "as the median of the repeats after one warm-up of both"
        + (" — QUICK smoke run (3 epochs), ratios not meaningful" if quick else ""),
        "", "| Training | epochs | Lightning (s) | fast (s) | ratio | same weights |",
        "|---|---|---|---|---|---|",
    ]
    for label, row in rows:
        epochs = (str(row["epochs"]) if row["epochs"] == row["epochs_oracle"]
                  else f"{row['epochs']} vs {row['epochs_oracle']}")
        lines.append(f"| {label} (lr {row['tuned']['lr']:.4g}, batch "
                     f"{row['tuned']['batch_size']}) | {epochs} | {row['lightning']:.3g} | "
                     f"{row['fast']:.3g} | {row['ratio']:.1f}x | "
                     f"{'yes' if row['equal'] else 'NO'} |")
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> None:
    """Run the measurements and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uci", nargs="*", default=["real_estate"], choices=sorted(UCI_TUNED),
                        help="UCI data sets to time besides the toy (paper protocol)")
    parser.add_argument("--repeats", type=int, default=1, help="timed calls per loop")
    parser.add_argument("--quick", action="store_true", help="3 epochs at most (CI smoke)")
    parser.add_argument("--out", help="Markdown report path (printed either way)")
    args = parser.parse_args(argv)
    max_epochs = 3 if args.quick else 500
    info = machine()
    todo = problems(args.uci)
    for loop in ("lightning", "fast"):  # warm-up: imports, first Trainer
        train_paper_mlp(todo[0][1](), seed=42, loop=loop, max_epochs=2, **todo[0][2])
    for loop in ("lightning", "fast"):
        AlphaVIMethod(loop=loop, max_epochs=2).fit(todo[0][1](), seed=42)
    rows = [(label, bench_problem(make, tuned, max_epochs, args.repeats))
            for label, make, tuned in todo]
    rows += [(f"Table 2 toy, {label}", bench_vi(method_cls, max_epochs, args.repeats))
             for label, method_cls in (("alpha-VI", AlphaVIMethod), ("MFVI", MFVIMethod))]
    report = render(sys.argv[1:] if argv is None else argv, info, args.quick, rows)
    publish(report, args.out)


if __name__ == "__main__":
    main()
