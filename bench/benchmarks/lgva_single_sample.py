"""What LGVA does with one Monte Carlo sample from OGGN's settled state (GGN thesis Figure
5.4, corrected protocol: LGVA at step 0.1 ends with a training NLL far above a constant
prediction's).

``python -m bench.benchmarks.lgva_single_sample [--oggn-iterations 1000] [--iterations 600]
[--quick] [--out FILE]`` prints (or writes to ``FILE``) a Markdown report. On Figure 5.4's
problem (150 Snelson points, 1 -> 5 x 25 tanh -> 1, P = 2676, float64, delta = 10^-0.2,
sigma^2 = 0.1, seed 0's initial mean, Sigma_0 = 0.1 I):

1. OGGN at step 0.1 with the corrected protocol's stopping rule (window 20, gradient 1e-3,
   step 1e-4) for at most ``--oggn-iterations`` (the cpu scale's cap): the start state
   ``(mu_0, Lambda_0)``.
2. From that state, ``--iterations`` updates each of: LGVA with S = 1 at steps 0.1 and 0.01,
   LGVA with S = 10 at step 0.1, and OGGN at step 0.1 (no draws: the control). At checkpoints
   the table gives the training NLL at the mean, the distance of the mean from ``mu_0`` in
   ``Lambda_0``'s norm (``d = sqrt((mu - mu_0)^T Lambda_0 (mu - mu_0))``, in posterior standard
   deviations) and the change of ``log det Lambda``.

The yardstick for ``d`` is the linear-Gaussian model, where ``J`` does not move: there the
LGVA mean obeys ``e_{t+1} = (1 - gamma) e_t - gamma Lambda^-1 H eps_t`` with ``eps_t`` the
draw's offset, ``N(0, Lambda^-1 / S)`` averaged over S draws, so it settles around ``mu*`` with
``E[d^2] = gamma / (2 - gamma) / S * sum_i (1 - delta / lambda_i)^2`` (``lambda_i`` the
eigenvalues of ``Lambda_0 = delta I + H``). A mean that goes far beyond that is not the linear
model's jitter.

``--quick`` shrinks the sizes (CI smoke); its numbers are not meaningful.
"""

from __future__ import annotations

import math
import sys

import torch

from bench.benchmarks.command_line import parsed_sizes
from bench.benchmarks.network_ssla import machine, publish
from bench.datasets.snelson import SnelsonGapData
from bench.harness.rng import derived_seed, make_generator
from bench.methods.laplace.ggn_methods import FIT_STREAM
from bench.methods.variational.ggn_natural_gradient import (
    NaturalGradientSchedule,
    NaturalGradientState,
    precision_and_mean_update,
    pseudo_data_statistics,
    run_natural_gradient_vi,
)
from bench.methods.variational.ggn_pseudo_data import pseudo_data_rule
from bench.models.glm_likelihoods import GaussianLikelihood
from bench.models.mlp import MLPShape, init_parameters
from bench.training.stopping import StationarityRule

FULL = {"hidden": 25, "oggn_iterations": 1000, "iterations": 400}
QUICK = {"hidden": 4, "oggn_iterations": 100, "iterations": 20}
SIZES = {"hidden": "units in each of the 5 hidden layers",
         "oggn_iterations": "cap on OGGN's iterations to its settled state",
         "iterations": "updates of each run from that state"}
# Figure 5.4 (conf/experiment/ggn_thesis/figure-5.4.yaml) and the corrected protocol's OGGN
# (conf/ggn_fit/corrected.yaml).
DELTA, NOISE, SEED, INITIAL_VARIANCE = 0.6309573444801932, 0.1, 0, 0.1
OGGN_RULE = StationarityRule(20, 1e-3, 1e-4)
# (label, algorithm, step size, Monte Carlo samples) of the runs from the settled state.
RUNS = (("LGVA, S = 1, step 0.1", "lgva", 0.1, 1), ("LGVA, S = 1, step 0.01", "lgva", 0.01, 1),
        ("LGVA, S = 10, step 0.1", "lgva", 0.1, 10), ("OGGN, step 0.1 (control)", "oggn", 0.1, 1))
CHECKPOINTS = (1, 5, 10, 50, 100, 200, 400)
SPLIT_STEPS = 12


def linear_jitter(state: NaturalGradientState, step_size: float, samples: int) -> float:
    """The linear-Gaussian model's stationary ``sqrt(E[d^2])`` of the LGVA mean around its
    fixed point, in ``Lambda``'s norm (module docstring)."""
    eigenvalues = torch.linalg.eigvalsh(state.precision)
    directions = float(((1 - DELTA / eigenvalues) ** 2).sum())
    return math.sqrt(step_size / (2 - step_size) / samples * directions)


def norm_in(state: NaturalGradientState, vector: torch.Tensor) -> float:
    """``sqrt(v^T Lambda v)`` with ``Lambda = L L^T`` the state's precision."""
    return float((state.precision_cholesky.T @ vector).norm())


def step_with_split(problem: dict, state: NaturalGradientState, algorithm: str,
                    step_size: float, samples: int, generator: torch.Generator
                    ) -> tuple[NaturalGradientState, torch.Tensor, torch.Tensor]:
    """One update of the project's loop (the algorithm's pseudo-data rule, its statistics and
    update), with the part of the mean's step that the draws add: ``gamma Lambda_{t+1}^-1``
    times the gradient's change from ``f(mu)`` to ``f-hat`` (zero for OGGN; exact for a
    Gaussian likelihood, whose ``H`` does not see the draws). Returns the new state, that
    noise step and the draws' offset as the update sees it: the least-norm ``e`` with
    ``J e`` equal to the draws' mean ``f-hat - f(mu)`` (the part of ``theta_s - mu`` outside
    ``J``'s row space does not enter the update; the linear model's bound holds for ``e`` as
    for ``theta_s - mu``, since ``H e = H (theta_s - mu)``)."""
    network, x, y, likelihood = (problem[key] for key in ("network", "x", "y", "likelihood"))
    f_hat, jacobians = pseudo_data_rule(algorithm)(network, state, x, samples, generator)
    gradient, rows = pseudo_data_statistics(f_hat, jacobians, y, likelihood)
    new = precision_and_mean_update(state, gradient - DELTA * state.mean, rows, DELTA,
                                    step_size)
    f_mean = network.forward_1d(state.mean, x)
    offset = torch.linalg.lstsq(jacobians[0], (f_hat - f_mean).mean(0).unsqueeze(1)).solution
    mean_only, _ = pseudo_data_statistics(f_mean.unsqueeze(0), jacobians[:1], y, likelihood)
    noise = step_size * torch.cholesky_solve((gradient - mean_only).unsqueeze(1),
                                             new.precision_cholesky).squeeze(1)
    return new, noise, offset.squeeze(1)


def run_from(problem: dict, start: NaturalGradientState, algorithm: str, step_size: float,
             samples: int, iterations: int) -> dict:
    """``iterations`` updates from ``start``; at each checkpoint the training NLL, the mean's
    distance from ``start``'s (in its precision norm) and ``log det Lambda``'s change; for the
    first :data:`SPLIT_STEPS` updates the noise step's size and its amplification: the noise
    step over ``gamma`` times the draws' offset as the update sees it (both in ``start``'s
    norm), at most about 1 in the linear-Gaussian model once ``Lambda = delta I + H``, above 1
    where ``H`` at the mean outgrows the precision."""
    network, x, y, likelihood = (problem[key] for key in ("network", "x", "y", "likelihood"))
    generator = make_generator(derived_seed([SEED, FIT_STREAM, samples]))
    state, checkpoints, split = start, [], []
    for t in range(1, iterations + 1):
        state, noise, offset = step_with_split(problem, state, algorithm, step_size, samples,
                                               generator)
        nll = float(-likelihood.log_prob(network.forward_1d(state.mean, x), y).sum())
        distance = norm_in(start, state.mean - start.mean)
        if t <= SPLIT_STEPS:
            drawn = step_size * norm_in(start, offset)
            split.append({"iteration": t, "train_nll": nll, "distance": distance,
                          "noise_step": norm_in(start, noise),
                          "amplification": norm_in(start, noise) / drawn if drawn else 0.0})
        if t in CHECKPOINTS or t == iterations:
            checkpoints.append({"iteration": t, "train_nll": nll, "distance": distance,
                                "log_det_change": state.log_det_precision()
                                - start.log_det_precision()})
    return {"checkpoints": checkpoints, "split": split}


def measure(cfg: dict) -> dict:
    """OGGN's settled state, then every run of :data:`RUNS` from it."""
    data = SnelsonGapData().splits()
    network = MLPShape((1, *[cfg["hidden"]] * 5, 1), "tanh")
    likelihood = GaussianLikelihood(NOISE)
    problem = {"network": network, "x": data.x_train, "y": data.y_train,
               "likelihood": likelihood}
    initial = init_parameters(network, make_generator(SEED), torch.float64)
    settled, trace = run_natural_gradient_vi(
        "oggn", network, data.x_train, data.y_train, likelihood, DELTA, initial,
        schedule=NaturalGradientSchedule(0.1, cfg["oggn_iterations"], INITIAL_VARIANCE, 1),
        generator=make_generator(derived_seed([SEED, FIT_STREAM])), stopping=OGGN_RULE)
    constant = float(-likelihood.log_prob(torch.full_like(data.y_train, float(
        data.y_train.mean())), data.y_train).sum())
    runs = [{"label": label, "step": step, "jitter": linear_jitter(settled, step, samples),
             **run_from(problem, settled, algorithm, step, samples, cfg["iterations"])}
            for label, algorithm, step, samples in RUNS]
    return {"n_params": network.n_params, "oggn_iterations": len(trace.train_nll),
            "oggn_stop": trace.stop_reason, "oggn_nll": trace.train_nll[-1],
            "oggn_gradient": trace.gradient_norm[-1], "constant_nll": constant, "runs": runs}


def render(argv: list[str], cfg: dict, info: dict, result: dict) -> str:
    """The Markdown report."""
    lines = [
        "# LGVA with one Monte Carlo sample from OGGN's settled state (GGN thesis Figure 5.4)",
        "", f"Command: `python -m bench.benchmarks.lgva_single_sample {' '.join(argv)}` · "
        f"commit {info['sha']} · {info['cpu']} · torch {info['torch']} · load average "
        f"{info['load']}", "",
        f"Network 1 -> 5 x {cfg['hidden']} tanh -> 1 (P = {result['n_params']}, float64), 150 "
        f"Snelson points, delta {DELTA:.4f}, sigma^2 {NOISE}, seed {SEED}. Start: OGGN at step "
        f"0.1 from seed {SEED}'s initial mean, {result['oggn_iterations']} iterations (stop "
        f"reason {result['oggn_stop']}, final gradient norm {result['oggn_gradient']:.3g}), "
        f"training NLL at its mean {result['oggn_nll']:.2f} (a constant prediction: "
        f"{result['constant_nll']:.2f}).", "",
        "d: the mean's distance from OGGN's in OGGN's precision norm (posterior standard "
        "deviations); linear d: the linear-Gaussian model's stationary sqrt(E[d^2]) for that "
        "step and S (module docstring); log det: change of log det Lambda.", "",
        "| run | linear d | " + " | ".join(f"it. {row['iteration']}" for row in
                                            result["runs"][0]["checkpoints"]) + " |",
        "|:--|--:|" + "--:|" * len(result["runs"][0]["checkpoints"]),
    ]
    for run in result["runs"]:
        cells = [f"NLL {row['train_nll']:.4g}, d {row['distance']:.3g}, "
                 f"log det {row['log_det_change']:+.3g}" for row in run["checkpoints"]]
        lines.append(f"| {run['label']} | {run['jitter']:.3g} | " + " | ".join(cells) + " |")
    sampled = [run for run in result["runs"] if any(r["noise_step"] for r in run["split"])]
    lines += [
        "", "## The draws' part of each mean step, first updates", "",
        "noise: the part of the mean's step that the draws add (gamma Lambda_{t+1}^-1 times "
        "the gradient's change from f(mu) to f-hat), in OGGN's precision norm; amp.: that "
        "over gamma times the draws' offset as the update sees it (the least-norm e with J e = "
        "the draws' mean f-hat - f(mu); same norm): at most about 1 in the linear-Gaussian "
        "model, above 1 where H at the current mean outgrows the precision.", "",
        "| run | " + " | ".join(f"it. {row['iteration']}" for row in sampled[0]["split"])
        + " |", "|:--|" + "--:|" * len(sampled[0]["split"]),
    ]
    for run in sampled:
        lines.append(f"| {run['label']} (1 / gamma = {1 / run['step']:.0f}) | " + " | ".join(
            f"NLL {r['train_nll']:.4g}, noise {r['noise_step']:.3g}, amp. "
            f"{r['amplification']:.3g}" for r in run["split"]) + " |")
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write the report."""
    args, cfg = parsed_sizes(__doc__.split("\n")[0], SIZES, QUICK, FULL, argv)
    report = render(sys.argv[1:] if argv is None else argv, cfg, machine(), measure(cfg))
    publish(report, args.out)


if __name__ == "__main__":
    main()
