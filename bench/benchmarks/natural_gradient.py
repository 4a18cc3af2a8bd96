"""Cost of one natural-gradient iteration (VOGGN, LGVA, OGGN; GGN thesis Figures 5.4-5.5) at
the thesis's network size, and the project's update against the textbook one.

``python -m bench.benchmarks.natural_gradient [--iterations 10] [--threads 1] [--quick]
[--out FILE]`` prints (or writes to ``FILE``) a Markdown report. On the 150 Snelson training
points with the thesis's network (1 -> 5 x 25 tanh -> 1, P = 2676, float64):

* per algorithm (and VOGGN with S = 10), the wall and CPU seconds of one iteration of
  :func:`bench.methods.variational.ggn_natural_gradient.run_natural_gradient_vi` (pseudo-data,
  GGN product, Cholesky, monitoring), median over ``--iterations``;
* side by side on the same pseudo-data, the project's update
  (:func:`~bench.methods.variational.ggn_natural_gradient.natural_gradient_step`: the stacked
  rows' product accumulated into the decayed precision by one BLAS call) and the textbook one
  written here as the oracle (a ``P x P`` GGN per draw, summed, averaged, then mixed with
  the old precision), with the largest difference of the resulting precisions and means.

``--quick`` shrinks the sizes (CI smoke); its numbers are not meaningful.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from bench.benchmarks.command_line import chosen_sizes, sized_parser
from bench.benchmarks.network_ssla import machine, publish
from bench.curvature.jacobians import jacobian_ggn
from bench.datasets.snelson import SnelsonGapData
from bench.harness.rng import make_generator
from bench.methods.variational.ggn_natural_gradient import (
    NaturalGradientSchedule,
    NaturalGradientState,
    ggn_pseudo_data,
    natural_gradient_step,
    run_natural_gradient_vi,
)
from bench.models.glm_likelihoods import GaussianLikelihood
from bench.models.mlp import MLPShape, init_parameters

FULL = {"hidden": 25, "iterations": 10, "repeats": 5}
QUICK = {"hidden": 6, "iterations": 3, "repeats": 2}
ROWS = (("OGGN", "oggn", 1), ("LGVA", "lgva", 1), ("VOGGN", "voggn", 1),
        ("VOGGN, S = 10", "voggn", 10))
DELTA, NOISE, STEP = 0.6309573444801932, 0.1, 0.1
SIZES = {"iterations": "loop iterations per algorithm"}


def textbook_step(state: NaturalGradientState, f_hat, jacobians, y, likelihood,
                  prior_precision: float, step_size: float) -> NaturalGradientState:
    """The update as notes section 5 writes it, one ``P x P`` GGN per draw (the oracle)."""
    gradient = torch.zeros_like(state.mean)
    curvature = torch.zeros_like(state.precision)
    for f_s, jacobian in zip(f_hat, jacobians, strict=True):
        gradient += jacobian.T @ likelihood.residual(f_s, y)
        curvature += jacobian_ggn(jacobian, likelihood.hessian(f_s))
    gradient /= len(f_hat)
    curvature /= len(f_hat)
    curvature.diagonal().add_(prior_precision)
    precision = (1 - step_size) * state.precision + step_size * curvature
    cholesky = torch.linalg.cholesky(precision)
    direction = torch.cholesky_solve((gradient - prior_precision * state.mean).unsqueeze(1),
                                     cholesky).squeeze(1)
    return NaturalGradientState(state.mean + step_size * direction, precision, cholesky)


def seconds(fn, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``repeats`` calls after one warm-up."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start_wall)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def bench_row(cfg: dict, problem: dict, label: str, algorithm: str, samples: int) -> dict:
    """One row: seconds per iteration of the loop, and the two updates side by side."""
    network, x, y, likelihood, start = (problem[key] for key in
                                        ("network", "x", "y", "likelihood", "start"))

    def loop():
        run_natural_gradient_vi(algorithm, network, x, y, likelihood, DELTA, start,
                                schedule=NaturalGradientSchedule(STEP, cfg["iterations"], 0.1,
                                                                 samples),
                                generator=make_generator(1))

    loop_wall, loop_cpu = seconds(loop, 1)
    state = NaturalGradientState.isotropic(start, 0.1)
    f_hat, jacobians = ggn_pseudo_data(algorithm, network, state, x, samples,
                                       make_generator(2))
    arguments = (state, f_hat, jacobians, y, likelihood, DELTA, STEP)
    ours, oracle = natural_gradient_step(*arguments), textbook_step(*arguments)
    step_wall, _ = seconds(lambda: natural_gradient_step(*arguments), cfg["repeats"])
    oracle_wall, _ = seconds(lambda: textbook_step(*arguments), cfg["repeats"])
    return {"label": label, "loop_s": loop_wall / cfg["iterations"],
            "loop_cpu_s": loop_cpu / cfg["iterations"], "step_s": step_wall,
            "oracle_s": oracle_wall,
            "precision_difference": float((ours.precision - oracle.precision).abs().max()),
            "mean_difference": float((ours.mean - oracle.mean).abs().max())}


def bench_iterations(cfg: dict) -> dict:
    """Every row of :data:`ROWS` on the thesis's Snelson problem."""
    data = SnelsonGapData().splits()
    network = MLPShape((1, *[cfg["hidden"]] * 5, 1), "tanh")
    problem = {"network": network, "x": data.x_train, "y": data.y_train,
               "likelihood": GaussianLikelihood(NOISE),
               "start": init_parameters(network, make_generator(0), torch.float64)}
    return {"n_params": network.n_params,
            "rows": [bench_row(cfg, problem, *row) for row in ROWS]}


def render(argv: list[str], cfg: dict, info: dict, result: dict) -> str:
    """The Markdown report."""
    lines = [
        "# Natural-gradient VI: seconds per iteration (GGN thesis Figures 5.4-5.5)", "",
        f"Command: `python -m bench.benchmarks.natural_gradient {' '.join(argv)}` · commit "
        f"{info['sha']} · {info['cpu']} · torch threads {info['threads']} · torch "
        f"{info['torch']} · load average {info['load']}", "",
        f"Network 1 -> 5 x {cfg['hidden']} tanh -> 1 (P = {result['n_params']}, float64), 150 "
        f"Snelson points, step {STEP}. Loop: {cfg['iterations']} iterations of "
        "run_natural_gradient_vi (pseudo-data, GGN, Cholesky, monitoring), per iteration. "
        f"Update: one step on the same pseudo-data, median of {cfg['repeats']} after a warm-up; "
        "ours (stacked rows, one BLAS product into the decayed precision) vs the textbook "
        "update (a P x P GGN per draw, then mixed), with the largest differences.", "",
        "| algorithm | loop s / it. | loop CPU s / it. | update s (ours) | update s (textbook) "
        "| speed-up | max |Lambda diff| | max |mu diff| |",
        "|:--|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in result["rows"]:
        lines.append(f"| {row['label']} | {row['loop_s']:.3f} | {row['loop_cpu_s']:.3f} | "
                     f"{row['step_s']:.3f} | {row['oracle_s']:.3f} | "
                     f"{row['oracle_s'] / row['step_s']:.2f}x | "
                     f"{row['precision_difference']:.1e} | {row['mean_difference']:.1e} |")
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write the report."""
    args = sized_parser(__doc__.split("\n")[0], SIZES).parse_args(argv)
    cfg = chosen_sizes(args, QUICK, FULL, SIZES)
    torch.set_num_threads(args.threads)
    report = render(sys.argv[1:] if argv is None else argv, cfg, machine(),
                    bench_iterations(cfg))
    publish(report, args.out)


if __name__ == "__main__":
    main()
