"""Speed of training a grid of small networks at once vs one by one (GGN thesis Figure 5.2).

``python -m bench.benchmarks.network_grid_speed [--networks 31] [--steps 20] [--threads 1]
[--quick] [--out FILE]`` prints (or writes to ``FILE``) a Markdown report: the same
``--networks`` networks of the thesis's architecture (1 -> 5 x 25 tanh -> 1, P = 2676, float64)
on the 150 Snelson training points, each with its own prior precision (a row of the
(delta, sigma^2) grid), trained for ``--steps`` full-batch Adam steps

* batched: :func:`bench.training.network_grid.train_network_grid` on the whole row
  (``torch.func.vmap`` forward, one backward, one Adam over the ``[B, P]`` stack);
* one by one: the same function on each network alone (``B = 1``), as a loop would.

Both are timed with :func:`bench.harness.timing.timed` (warm-up, median of repeats) in the same
run, and checked to give the same parameters. The ratio is the speed-up of the batched path;
the report also extrapolates the cpu scale's grid (651 networks) from the batched time, and
times one forward + backward of the whole row alone: the floor under any batched step, and so
the largest speed-up batching could reach here.
``--quick`` shrinks the sizes (CI smoke); its numbers are not meaningful.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from bench.benchmarks.command_line import chosen_sizes, sized_parser
from bench.benchmarks.network_ssla import machine, publish
from bench.datasets.snelson import SnelsonGapData
from bench.harness.rng import make_generator
from bench.harness.timing import timed
from bench.models.glm_likelihoods import GaussianLikelihood
from bench.models.mlp import MLPShape, init_parameters
from bench.training.network_grid import negative_log_joint, train_network_grid

FULL = {"networks": 31, "steps": 20, "hidden": 25, "repeats": 5}
QUICK = {"networks": 4, "steps": 3, "hidden": 8, "repeats": 1}
GRID_NETWORKS, CPU_STEPS = 651, 3000
SIZES = {"networks": "networks of the grid row", "steps": "Adam steps per run"}


def cpu_timed(fn, seconds: list[float]):
    """``fn`` recording each call's process CPU seconds in ``seconds`` (on a shared machine the
    CPU time is what the work costs; the wall time also counts other processes' share)."""

    def call():
        start = time.process_time()
        result = fn()
        seconds.append(time.process_time() - start)
        return result

    return call


def bench_grid(cfg: dict) -> dict:
    """Median seconds of the batched and the one-by-one runs, and their largest difference."""
    data = SnelsonGapData().splits()
    network = MLPShape((1, *[cfg["hidden"]] * 5, 1), "tanh")
    initial = init_parameters(network, make_generator(0), torch.float64)
    deltas = torch.logspace(-4, 2, cfg["networks"], dtype=torch.float64)
    likelihood = GaussianLikelihood(0.1)

    def batched():
        return train_network_grid(network, data.x_train, data.y_train, likelihood, deltas,
                                  initial, lr=1e-3, steps=cfg["steps"]).theta

    def one_by_one():
        return torch.cat([train_network_grid(network, data.x_train, data.y_train, likelihood,
                                             deltas[b:b + 1], initial, lr=1e-3,
                                             steps=cfg["steps"]).theta
                          for b in range(cfg["networks"])])

    theta = initial.expand(cfg["networks"], -1).clone().requires_grad_(True)

    def gradients_only():
        """``steps`` forwards and backwards of the whole row, nothing else (no optimiser): the
        floor under the batched run on this hardware."""
        for _ in range(cfg["steps"]):
            objective = negative_log_joint(network, theta, data.x_train, data.y_train,
                                           likelihood, deltas).sum()
            gradient = torch.autograd.grad(objective, theta)[0]
        return gradient

    batched_cpu, single_cpu = [], []
    runs = {"batched": cpu_timed(batched, batched_cpu), "single": cpu_timed(one_by_one, single_cpu),
            "gradients": gradients_only}
    for run in runs.values():  # warm-up
        run()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    results = {}
    for _ in range(cfg["repeats"]):  # alternated, so a change of load hits all three alike
        for name, run in runs.items():
            elapsed, results[name] = timed(run, repeats=1, warmup=0)
            seconds[name].append(elapsed)
    batched_s, single_s, gradient_s = (statistics.median(seconds[name]) for name in runs)
    theta_batched, theta_single = results["batched"], results["single"]
    return {"batched_s": batched_s, "single_s": single_s, "gradient_s": gradient_s,
            "batched_cpu_s": statistics.median(batched_cpu[1:]),
            "single_cpu_s": statistics.median(single_cpu[1:]),
            "max_abs_difference": float((theta_batched - theta_single).abs().max()),
            "n_params": network.n_params}


def render(argv: list[str], cfg: dict, info: dict, result: dict) -> str:
    """The Markdown report."""
    network_steps = cfg["networks"] * cfg["steps"]
    per_network_step = result["batched_s"] / network_steps
    ratio = result["single_s"] / result["batched_s"]
    cpu_ratio = result["single_cpu_s"] / result["batched_cpu_s"]
    grid_minutes = result["batched_cpu_s"] / network_steps * GRID_NETWORKS * CPU_STEPS / 60
    floor = result["gradient_s"] / network_steps
    cap = result["single_s"] / network_steps / floor
    return "\n".join([
        "# Network grid: batched vs one-by-one training (GGN thesis Figure 5.2)",
        "",
        f"Command: `python -m bench.benchmarks.network_grid_speed {' '.join(argv)}` · commit "
        f"{info['sha']} · {info['cpu']} · torch threads {info['threads']} · torch "
        f"{info['torch']} · load average {info['load']}",
        "",
        f"{cfg['networks']} networks (P = {result['n_params']}, float64), {cfg['steps']} "
        "full-batch Adam steps on 150 points, median of "
        f"{cfg['repeats']} timed runs of each (alternated) after a warm-up.",
        "",
        "| path | wall s | ms per network-step | CPU s |",
        "|:--|--:|--:|--:|",
        f"| batched (vmap, one Adam over [B, P]) | {result['batched_s']:.3f} | "
        f"{1e3 * per_network_step:.3f} | {result['batched_cpu_s']:.3f} |",
        f"| one by one (B = 1 each) | {result['single_s']:.3f} | "
        f"{1e3 * result['single_s'] / network_steps:.3f} | {result['single_cpu_s']:.3f} |",
        f"| speed-up of batching | {ratio:.2f}x | | {cpu_ratio:.2f}x |",
        f"| floor: one forward + backward of the row, per network | | "
        f"{1e3 * floor:.3f} | |",
        f"| largest speed-up any batched step could reach (one by one / floor) | "
        f"{cap:.2f}x | | |",
        "",
        "The floor is the arithmetic of the batched step itself (vmap forward, autograd "
        "backward, float64, the threads above), timed alone: cutting the batched path's "
        "overheads (the optimiser, the loop) cannot take the speed-up past the cap; only "
        "cheaper arithmetic (a faster batched kernel, a lower precision) could.",
        "",
        f"Largest parameter difference between the two paths: "
        f"{result['max_abs_difference']:.2e} (the same optimisation).",
        f"Extrapolated cpu-scale grid ({GRID_NETWORKS} networks x {CPU_STEPS} steps, batched "
        f"rows of {cfg['networks']}): {grid_minutes:.1f} min of CPU time (one thread).",
        "",
    ])


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write the report."""
    args = sized_parser(__doc__.split("\n")[0], SIZES).parse_args(argv)
    cfg = chosen_sizes(args, QUICK, FULL, SIZES)
    torch.set_num_threads(args.threads)
    info = machine()
    report = render(sys.argv[1:] if argv is None else argv, cfg, info, bench_grid(cfg))
    publish(report, args.out)


if __name__ == "__main__":
    main()
