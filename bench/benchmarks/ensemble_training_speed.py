"""Speed of training deep-ensemble members together (one stacked network) vs one by one.

``python -m bench.benchmarks.ensemble_training_speed [--members 5] [--epochs 2]
[--batches 100] [--threads 2] [--repeats 1] [--quick] [--out FILE]`` prints (or writes to
``FILE``) a Markdown report: ``--members`` Laplace Redux LeNets (``lenet_redux``, 44,426
parameters) trained by the MAP recipe of Table 3 (Adam 1e-3, cosine schedule, weight decay
5e-4, batch 128) for ``--epochs`` epochs of ``--batches`` minibatches on MNIST-shaped images,
each from its own seed, through the trained-network store (checkpoints and all) into a fresh
temporary folder:

* one by one: :func:`bench.training.network_store.trained_network` per seed (the oracle);
* together: :func:`bench.training.stored_network_set.trained_networks` (one stacked network,
  grouped convolutions, one Adam over the stack), what DE uses by default.

Both run in the same process, after an untimed warm-up of both, alternated ``--repeats`` times
(median), wall and process CPU
seconds; the report gives the ratio and the largest weight difference between the two paths.
``--quick`` shrinks the sizes (CI smoke); its numbers are not meaningful.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor

from bench.benchmarks.command_line import chosen_sizes, sized_parser
from bench.benchmarks.network_ssla import machine, publish
from bench.harness.rng import make_generator
from bench.training.classifier import TrainingStage
from bench.training.network_store import DatasetIdentity, TrainingRecipe, trained_network
from bench.training.stored_network_set import trained_networks

FULL = {"members": 5, "epochs": 2, "batches": 100, "repeats": 1}
QUICK = {"members": 2, "epochs": 1, "batches": 2, "repeats": 1}
SIZES = {"members": "ensemble members trained", "epochs": "epochs per member",
         "batches": "minibatches of 128 per epoch", "repeats": "alternated runs of both paths"}
BATCH_SIZE = 128
TARGET = 2.0
PROBE = 1000


def member_recipe(n_train: int, epochs: int) -> TrainingRecipe:
    """Table 3's MAP recipe (conf/map_recipe/adam_b128.yaml) for ``epochs`` epochs."""
    stage = TrainingStage(epochs=epochs, lr=1e-3, batch_size=BATCH_SIZE, optimizer="adam",
                          weight_decay=5e-4, schedule="cosine")
    return TrainingRecipe(model="lenet_redux", stages=(stage,), dataset=DatasetIdentity(
        "random", "unit", (1, 28, 28), n_train))


def run_once(train, results: Path, probe: Tensor) -> tuple[float, float, list[dict], Tensor]:
    """Wall and CPU seconds of ``train(results)``, the members' weights it returns and their
    softmax outputs on ``probe``."""
    wall, cpu = time.perf_counter(), time.process_time()
    networks = train(results)
    seconds = (time.perf_counter() - wall, time.process_time() - cpu)
    with torch.no_grad():
        probs = torch.stack([torch.softmax(n.module(probe), -1) for n in networks])
    return (*seconds, [n.module.state_dict() for n in networks], probs)


def bench_members(cfg: dict) -> dict:
    """Median wall / CPU seconds of both paths and their largest weight difference."""
    n_train = cfg["batches"] * BATCH_SIZE
    g = make_generator(0)
    images = torch.rand(n_train, 1, 28, 28, generator=g)
    labels = torch.randint(0, 10, (n_train,), generator=g)
    recipe = member_recipe(n_train, cfg["epochs"])
    seeds = list(range(1, cfg["members"] + 1))

    def one_by_one(results: Path):
        return [trained_network(recipe, s, images, labels, results) for s in seeds]

    def together(results: Path):
        return trained_networks(recipe, seeds, images, labels, results)

    times = {"one_by_one": [], "together": []}
    weights, probs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        warm_up = member_recipe(BATCH_SIZE, 1)
        for together_now in (True, False):
            trained_networks(warm_up, seeds[:2], images[:BATCH_SIZE], labels[:BATCH_SIZE],
                             Path(tmp) / f"warm-up-{together_now}", together=together_now)
        for repeat in range(cfg["repeats"]):
            for name, train in (("one_by_one", one_by_one), ("together", together)):
                wall, cpu, weights[name], probs[name] = run_once(
                    train, Path(tmp) / f"{name}-{repeat}", images[:PROBE])
                times[name].append((wall, cpu))
    difference = max(float((a[k] - b[k]).abs().max())
                     for a, b in zip(weights["one_by_one"], weights["together"], strict=True)
                     for k in a)
    result = {f"{name}_{kind}": statistics.median(t[i] for t in values)
              for name, values in times.items() for i, kind in enumerate(("s", "cpu_s"))}
    return result | {"max_abs_difference": difference,
                     "max_prob_difference": float((probs["one_by_one"]
                                                   - probs["together"]).abs().max()),
                     "steps": cfg["members"] * cfg["epochs"] * cfg["batches"]}


def render(argv: list[str], cfg: dict, info: dict, result: dict) -> str:
    """The Markdown report."""
    ratio = result["one_by_one_s"] / result["together_s"]
    cpu_ratio = result["one_by_one_cpu_s"] / result["together_cpu_s"]
    steps = result["steps"]
    rows = [("together (stacked, grouped convs, one Adam)", "together"),
            ("one by one (trained_network per seed)", "one_by_one")]
    return "\n".join([
        "# Deep-ensemble members: trained together vs one by one (Laplace Redux Table 3 DE)",
        "",
        f"Command: `python -m bench.benchmarks.ensemble_training_speed {' '.join(argv)}` · "
        f"commit {info['sha']} · {info['cpu']} · torch threads {info['threads']} · torch "
        f"{info['torch']} · load average {info['load']}",
        "",
        f"{cfg['members']} LeNets (lenet_redux), Adam 1e-3 cosine, weight decay 5e-4, batch "
        f"{BATCH_SIZE}, {cfg['epochs']} epochs x {cfg['batches']} minibatches each, through the "
        f"network store; median of {cfg['repeats']} alternated run(s).",
        "",
        "| path | wall s | ms per member-step | CPU s |",
        "|:--|--:|--:|--:|",
        *[f"| {label} | {result[f'{key}_s']:.2f} | {1e3 * result[f'{key}_s'] / steps:.2f} | "
          f"{result[f'{key}_cpu_s']:.2f} |" for label, key in rows],
        f"| speed-up of training together | {ratio:.2f}x | | {cpu_ratio:.2f}x |",
        "",
        f"Target: {TARGET:.0f}x ({'met' if ratio >= TARGET else 'not met'} in wall time). "
        f"Largest weight difference between the paths: {result['max_abs_difference']:.2e}; "
        f"largest difference of a member's softmax on {PROBE} training images: "
        f"{result['max_prob_difference']:.2e}. The paths differ by float rounding only (equal "
        "within 1e-5 after a few steps, tests/unit/training/test_stacked_training.py); Adam "
        "moves every weight by about lr per step even where the gradient is at rounding level, "
        "so the weight difference grows with the steps.",
        "",
    ])


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write the report."""
    args = sized_parser(__doc__.split("\n")[0], SIZES, threads=2).parse_args(argv)
    cfg = chosen_sizes(args, QUICK, FULL, SIZES)
    torch.set_num_threads(args.threads)
    info = machine()
    report = render(sys.argv[1:] if argv is None else argv, cfg, info, bench_members(cfg))
    publish(report, args.out)


if __name__ == "__main__":
    main()
