"""Speed of a LeNet training step with subnormal weights, as they are against set to zero (what
classifier training does after every step, :mod:`bench.training.subnormal_weights`).

``python -m bench.benchmarks.subnormal_training [--batch 512] [--steps 10] [--repeats 5]
[--threads 1] [--quick] [--out FILE]`` prints (or writes to ``FILE``) a Markdown report. It
builds Laplace Redux's LeNet (``lenet_redux``) and sets a share of its weights, the smallest
in magnitude, to subnormal values (1e-40 to 1e-38, sign kept): none, the share found in the MAP
network of the authors' code recipe (``adam_b512``) after its 100 epochs (5,655 of 44,426) and
the share found with Adam at lr 0.1 (39,511). For each it times, alternated in one run,
``--steps`` forward and backward passes of one minibatch of MNIST-sized images through the
network as it is and through a copy with those weights set to zero, and checks that the two
give the same loss.
``--quick`` shrinks the sizes (CI smoke); its numbers are not meaningful.
"""

from __future__ import annotations

import copy
import sys

import torch
import torch.nn.functional as F

from bench.benchmarks.command_line import parsed_sizes
from bench.benchmarks.network_ssla import machine, publish
from bench.harness.timing import timed
from bench.models.classifiers import build_classifier
from bench.training.subnormal_weights import zero_subnormal_weights

FULL = {"batch": 512, "steps": 10, "repeats": 5}
QUICK = {"batch": 16, "steps": 1, "repeats": 1}
SIZES = {"batch": "images per minibatch", "steps": "forward + backward passes per timing",
         "repeats": "timings of each mode (median)"}
# Subnormal weights counted in stored MAP LeNets (results/networks/lenet_redux/mnist/...).
SUBNORMAL_SHARES = (("none", 0),
                    ("authors' code recipe (Adam, lr 1e-3, batch 512)", 5655),
                    ("Adam, lr 0.1, batch 512", 39511))


def lenet_with_subnormal_weights(count: int) -> torch.nn.Module:
    """``lenet_redux`` whose ``count`` smallest weights (in magnitude) are made subnormal."""
    net = build_classifier("lenet_redux", torch.Generator().manual_seed(0))
    flat = torch.cat([p.detach().flatten() for p in net.parameters()])
    if count:
        smallest = flat.abs().argsort()[:count]
        tiny = torch.logspace(-40, -38, count, dtype=flat.dtype)
        flat[smallest] = torch.where(flat[smallest] < 0, -tiny, tiny)
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(flat, net.parameters())
    return net


def bench_share(count: int, batch: int, steps: int, repeats: int) -> dict:
    """Median seconds per forward + backward pass with the subnormal weights and with them
    set to zero."""
    as_is = lenet_with_subnormal_weights(count)
    zeroed = copy.deepcopy(as_is)
    zero_subnormal_weights(zeroed.parameters())
    generator = torch.Generator().manual_seed(1)
    x = torch.rand(batch, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (batch,), generator=generator)

    def passes(net: torch.nn.Module) -> float:
        for _ in range(steps):
            net.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
        return float(loss.detach())

    passes(as_is), passes(zeroed)  # warm-up
    as_is_s, zeroed_s = [], []
    for _ in range(repeats):  # alternated, so both see the same machine
        seconds, as_is_loss = timed(lambda: passes(as_is), 1, warmup=0)
        as_is_s.append(seconds / steps)
        seconds, zeroed_loss = timed(lambda: passes(zeroed), 1, warmup=0)
        zeroed_s.append(seconds / steps)
    return {"as_is_s": sorted(as_is_s)[len(as_is_s) // 2],
            "zeroed_s": sorted(zeroed_s)[len(zeroed_s) // 2],
            "loss_difference": abs(as_is_loss - zeroed_loss)}


def render(argv: list[str], info: dict, cfg: dict, results: dict[str, dict]) -> str:
    """The Markdown report."""
    lines = [
        "# LeNet training steps with subnormal weights: as they are vs set to zero", "",
        f"Command: `python -m bench.benchmarks.subnormal_training {' '.join(argv)}`".rstrip()
        + "  ",
        f"Commit {info['sha']} · {info['cpu']} · {info['threads']} torch thread(s) · "
        f"torch {info['torch']} · load {info['load']}", "",
        f"Forward + backward of {cfg['batch']} MNIST-sized images through `lenet_redux` "
        "(44,426 weights), median ms per pass of alternated timings.", "",
        "| subnormal weights | count | as they are ms | set to zero ms | speed-up | "
        "loss difference |",
        "|---|---|---|---|---|---|",
    ]
    for label, result in results.items():
        lines.append(
            f"| {label} | {result['count']:,} | {1000 * result['as_is_s']:.1f} | "
            f"{1000 * result['zeroed_s']:.1f} | "
            f"{result['as_is_s'] / result['zeroed_s']:.1f}x | "
            f"{result['loss_difference']:.1e} |")
    lines += [
        "",
        "x86 CPUs compute with subnormal operands in microcode. The counts are those of stored "
        "MAP networks after 100 epochs; classifier training sets such weights to zero after "
        "every step (`bench.training.subnormal_weights`).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write the report."""
    args, cfg = parsed_sizes(__doc__.split("\n")[0], SIZES, QUICK, FULL, argv)
    info = machine()
    results = {label: {**bench_share(count, cfg["batch"], cfg["steps"], cfg["repeats"]),
                       "count": count}
               for label, count in SUBNORMAL_SHARES}
    publish(render(sys.argv[1:] if argv is None else argv, info, cfg, results), args.out)


if __name__ == "__main__":
    main()
