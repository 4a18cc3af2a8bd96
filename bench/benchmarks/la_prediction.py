"""Where the last-layer LA's prediction time over MAP goes (Laplace Redux Table 3's anchor).

``python -m bench.benchmarks.la_prediction [--n-test 8000] [--n-train 1024] [--repeats 5]
[--threads 1] [--device cpu] [--quick] [--out FILE]`` prints (or writes to ``FILE``) a Markdown
report. Table 3's anchor "prediction time LA / MAP" times ``method.predict`` of the LA row
against the MAP network's softmax on the same inputs, in the same job
(:mod:`bench.jobs.classification_runner`). This benchmark repeats that comparison on the
Redux LeNet (44,426 parameters, seeded random weights: the time does not depend on their
values) and ``n_test`` standard normal MNIST-shaped inputs, with the LA built as the Table 3
row builds it (``conf/method/laplace_classifier.yaml``, variant LA: last-layer K-FAC, BackPACK
GGN, prior precision by marginal likelihood, GLM probit predictive in chunks of
``prediction.batch_size``), fitted on ``n_train`` random labelled inputs. In one run, interleaved
so that load drifts hit every side alike, it times:

1. MAP: :class:`~bench.methods.baselines.map_classifier.MapClassifier` (forward without
   gradients, softmax) in the LA's chunk size, as the task's reference;
2. the LA's prediction, ``method.predict(x)``;
3. the same prediction taken apart, step by step as
   :func:`bench.methods.laplace.classification.laplace_predictive` and laplace-torch 0.3 run
   it (``la(x, pred_type="glm", link_approx="probit")``), each step's seconds summed over the
   chunks: the input's move to the network's device and dtype; the feature forward
   (``FeatureExtractor.forward_with_features``, with autograd recording, as laplace-torch
   calls it outside ``no_grad``); the last-layer Jacobians (identity tiled per input, the
   ``[B, K, K * H]`` einsum and the bias block); the posterior precision object
   (``KronDecomposed`` scaled and shifted by the prior); the functional variance, split into
   the Kronecker eigenbasis products ``P^-1 J^T`` (``KronDecomposed._bmm``) and ``J (P^-1
   J^T)`` (``bmm``), giving the full ``K x K`` covariance of which probit reads the diagonal;
   the probit scaling and softmax; the concatenation into a Categorical. Shares are of the
   steps' sum; its difference to the LA's total (timed on its own in the same round) is
   laplace-torch's argument checks and Python dispatch plus timing noise. The reassembled
   probabilities are checked to equal ``method.predict``'s;
4. what two changes that keep the numbers would give (not used by the method): the feature
   forward under ``torch.no_grad``, and the diagonal of the functional variance from the
   Kronecker eigendecomposition without forming the Jacobians (:func:`kron_variance_diagonal`;
   its largest relative difference to laplace-torch's diagonal is reported).

Every time is the median over ``repeats`` rounds after one warm-up round. ``--quick`` shrinks
every size (CI smoke); its numbers are not meaningful.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from torch import Tensor

from bench.benchmarks.command_line import chosen_sizes, sized_parser
from bench.benchmarks.network_ssla import machine, publish
from bench.harness.fitted_variants import built_variants
from bench.harness.overrides import CONF_DIR
from bench.harness.rng import make_generator
from bench.harness.timing import Stopwatch
from bench.methods.baselines.map_classifier import MapClassifier
from bench.models.classifiers import build_classifier, count_parameters
from bench.predictive.categorical import Categorical

MODEL = "lenet_redux"
METHOD_NODE = CONF_DIR / "method" / "laplace_classifier.yaml"
ROW = "LA"
# The steps of the LA's prediction, in the order they run, with their report labels.
STEPS = {
    "input": "input to the network's device and dtype, split into chunks",
    "features": "feature forward (autograd recording, as laplace-torch calls it)",
    "jacobians": "last-layer Jacobians (identity tiled per input, einsum, bias block)",
    "precision": "posterior precision object (KronDecomposed scaled, prior added)",
    "eigenbasis": "functional variance: Kronecker eigenbasis products P^-1 J^T",
    "square_form": "functional variance: J (P^-1 J^T), full K x K per input",
    "probit": "probit scaling of the variance's diagonal and softmax",
    "collect": "concatenate the chunks into a Categorical",
}
FULL = {"n_test": 8000, "n_train": 1024, "repeats": 7}
QUICK = {"n_test": 64, "n_train": 64, "repeats": 1}
SIZES = {"n_test": "test inputs (Table 3's MNIST test part: 8000)",
         "n_train": "inputs of the LA's fit", "repeats": "timed rounds"}


def mnist_shaped(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """``n`` standard normal ``[1, 28, 28]`` inputs and uniform labels of 10 classes."""
    generator = make_generator(seed)
    return (torch.randn(n, 1, 28, 28, generator=generator),
            torch.randint(0, 10, (n,), generator=generator))


def table_3_laplace(device: str) -> Any:
    """The LA row of Table 3, unfitted: ``conf/method/laplace_classifier.yaml``'s variant LA
    on ``device``."""
    node = OmegaConf.load(METHOD_NODE)
    node.device = device
    ((_, method),) = built_variants(node, ROW)
    return method


def last_layer_jacobians(la: Any, phi: Tensor, f: Tensor) -> Tensor:
    """laplace-torch 0.3's ``CurvatureInterface.last_layer_jacobians`` after the forward:
    ``[B, K, K * H (+ K)]`` from the features ``phi`` and the outputs ``f``."""
    batch, outputs = phi.shape[0], f.shape[-1]
    identity = torch.eye(outputs, device=phi.device, dtype=phi.dtype).unsqueeze(0).tile(
        batch, 1, 1)
    jacobians = torch.einsum("kp,kij->kijp", phi, identity).reshape(batch, outputs, -1)
    if la.model.last_layer.bias is not None:
        jacobians = torch.cat([jacobians, identity], dim=2)
    return jacobians


def kron_variance_diagonal(la: Any, phi: Tensor) -> Tensor:
    """The diagonal of the last-layer K-FAC LA's functional variance ``J P^-1 J^T`` at the
    features ``phi`` ``[B, H]``, from the eigendecomposition of the posterior precision,
    without forming the Jacobians.

    For output ``i`` the weight block of ``J`` is ``e_i phi^T``; with the precision's weight
    factors ``Q1 diag(l1) Q1^T`` (outputs) and ``Q2 diag(l2) Q2^T`` (inputs) plus ``delta``,
    ``var_i = sum_ac Q1[i, a]^2 (Q2^T phi)_c^2 / (l1_a l2_c + delta)``; the bias block adds
    ``(Q diag(1 / (l + delta)) Q^T)_ii``, the same for every input. ``O(B (H^2 + H K + K^2))``
    against the ``O(B K^2 H (K + H))`` of the dense Jacobian route.
    """
    precision = la.posterior_precision
    if precision.damping:
        raise ValueError("kron_variance_diagonal needs an undamped KronDecomposed")
    (q_out, q_in), (l_out, l_in) = precision.eigenvectors[0], precision.eigenvalues[0]
    inverse = 1.0 / (torch.outer(l_out, l_in) + precision.deltas[0])
    projected = (phi @ q_in) ** 2
    variance = projected @ inverse.T @ (q_out ** 2).T
    if len(precision.eigenvalues) > 1:
        (q_bias,), (l_bias,) = precision.eigenvectors[1], precision.eigenvalues[1]
        variance = variance + (q_bias ** 2) @ (1.0 / (l_bias + precision.deltas[1]))
    return variance


class StepTimer:
    """Seconds per named step, summed over calls: ``with timer("step"): ...``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._name = ""
        self._watch: Stopwatch | None = None

    def __call__(self, name: str) -> StepTimer:
        self._name = name
        return self

    def __enter__(self) -> StepTimer:
        self._watch = Stopwatch()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds[self._name] = self.seconds.get(self._name, 0.0) + self._watch.elapsed()


def input_chunks(method: Any, x: Tensor) -> tuple[Tensor, ...]:
    """``x`` on the LA network's device and dtype, split into the method's prediction
    batches, as :func:`laplace_predictive` feeds it."""
    reference = next(method.la.model.parameters())
    return x.to(device=reference.device, dtype=reference.dtype).split(method.prediction.batch_size)


def prediction_in_steps(method: Any, x: Tensor) -> tuple[dict[str, float], Tensor]:
    """The LA's probit prediction at ``x`` as :func:`laplace_predictive` and laplace-torch run
    it, each step timed (seconds per step of :data:`STEPS`, probabilities)."""
    la, timer = method.la, StepTimer()
    with timer("input"):
        chunks = input_chunks(method, x)
    probs = []
    for chunk in chunks:
        with timer("features"):
            f, phi = la.model.forward_with_features(chunk)
        with timer("jacobians"):
            jacobians = last_layer_jacobians(la, phi, f).detach()
            f = f.detach()
        with timer("precision"):
            precision = la.posterior_precision
        with timer("eigenbasis"):
            scaled = precision._bmm(jacobians, exponent=-1)
        with timer("square_form"):
            f_var = torch.bmm(jacobians, scaled.transpose(1, 2)).detach()
        with timer("probit"):
            kappa = 1 / torch.sqrt(1.0 + np.pi / 8 * f_var.diagonal(dim1=1, dim2=2))
            probs.append(torch.softmax(kappa * f, dim=-1))
    with timer("collect"):
        result = Categorical(torch.cat(probs).detach())
    return timer.seconds, result.probs


def fixed_prediction(method: Any, x: Tensor) -> tuple[dict[str, float], Tensor]:
    """The same probabilities with the two changes of the module docstring: the feature
    forward without autograd and :func:`kron_variance_diagonal` (seconds per step, probs)."""
    la, timer = method.la, StepTimer()
    with timer("input"):
        chunks = input_chunks(method, x)
    probs = []
    for chunk in chunks:
        with timer("features"), torch.no_grad():
            f, phi = la.model.forward_with_features(chunk)
        with timer("variance"), torch.no_grad():
            variance = kron_variance_diagonal(la, phi)
        with timer("probit"):
            probs.append(torch.softmax(f / torch.sqrt(1.0 + np.pi / 8 * variance), dim=-1))
    with timer("collect"):
        result = Categorical(torch.cat(probs))
    return timer.seconds, result.probs


def timed_once(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one synchronised call."""
    with Stopwatch() as watch:
        result = fn()
    return watch.seconds, result


def measure(cfg: dict, device: str) -> dict:
    """Fit the LA, then time every side ``repeats`` times, interleaved, after a warm-up."""
    network = build_classifier(MODEL, make_generator(0), device=device).eval()
    train_x, train_y = mnist_shaped(cfg["n_train"], 0)
    x = mnist_shaped(cfg["n_test"], 1)[0].to(device)
    method = table_3_laplace(device)
    diagnostics = method.fit(SimpleNamespace(train_inputs=train_x.to(device),
                                             train_labels=train_y.to(device)), 0, base=network)
    map_method = MapClassifier(prediction=method.prediction, device=device)
    map_method.fit(None, 0, base=network)
    sides: dict[str, list[float]] = {"map": [], "la": []}
    steps: dict[str, list[float]] = {}
    fixed: dict[str, list[float]] = {}
    for round_ in range(cfg["repeats"] + 1):
        map_s, _ = timed_once(lambda: map_method.predict(x))
        la_s, la_pred = timed_once(lambda: method.predict(x))
        step_s, step_probs = prediction_in_steps(method, x)
        fixed_s, fixed_probs = fixed_prediction(method, x)
        if round_ == 0:  # warm-up: lazy initialisation, allocator and kernel caches
            continue
        sides["map"].append(map_s)
        sides["la"].append(la_s)
        for name, seconds in step_s.items():
            steps.setdefault(name, []).append(seconds)
        for name, seconds in fixed_s.items():
            fixed.setdefault(name, []).append(seconds)
    with torch.no_grad():
        f, phi = method.la.model.forward_with_features(x[: method.prediction.batch_size])
        exact = method.la.functional_variance(last_layer_jacobians(method.la, phi, f)).diagonal(
            dim1=1, dim2=2)
        variance_gap = float(((kron_variance_diagonal(method.la, phi) - exact).abs()
                              / exact.abs()).max())
    return {
        "map_s": statistics.median(sides["map"]), "la_s": statistics.median(sides["la"]),
        "steps": {name: statistics.median(values) for name, values in steps.items()},
        "fixed": {name: statistics.median(values) for name, values in fixed.items()},
        "steps_equal": torch.equal(step_probs, la_pred.probs),
        "fixed_gap": float((fixed_probs - la_pred.probs).abs().max()),
        "variance_gap": variance_gap, "dtype": str(next(network.parameters()).dtype),
        "n_parameters": count_parameters(network), "prior_precision":
            diagnostics["prior_precision"], "chunk": method.prediction.batch_size,
        "n_last": int(method.la.n_params), "n": len(x),
    }


def share(seconds: float, total: float) -> str:
    """``seconds`` as a percentage of ``total``."""
    return f"{100 * seconds / total:.1f}%"


def step_rows(result: dict) -> tuple[list[tuple[str, float]], float]:
    """(label, seconds) of each step of :data:`STEPS`, and the steps' sum."""
    rows = [(STEPS[name], result["steps"][name]) for name in STEPS]
    return rows, sum(seconds for _, seconds in rows)


def quotable_split(result: dict) -> str:
    """One line naming the LA / MAP ratio and the shares of the LA's steps, largest first."""
    steps = result["steps"]
    _, total = step_rows(result)
    groups = {
        "functional variance (K-FAC eigenbasis products on the dense last-layer Jacobians, "
        "then J P^-1 J^T: the full K x K covariance, of which probit reads the diagonal)":
            steps["eigenbasis"] + steps["square_form"] + steps["precision"],
        "feature forward (the MAP's forward, with autograd recording)": steps["features"],
        "building the last-layer Jacobians": steps["jacobians"],
        "probit scaling and softmax": steps["probit"],
        "input conversion and concatenation": steps["input"] + steps["collect"],
    }
    parts = ", ".join(f"{share(seconds, total)} {label}" for label, seconds in
                      sorted(groups.items(), key=lambda item: -item[1]))
    return (f"LA / MAP prediction time {result['la_s'] / result['map_s']:.2f}x on "
            f"{result['n']} inputs; of the LA's time: {parts}")


def render(argv: list[str], cfg: dict, info: dict, device: str, result: dict,
           quick: bool) -> str:
    """The Markdown report."""
    rows, steps_total = step_rows(result)
    total = result["la_s"]
    fixed_total = sum(result["fixed"].values())
    map_s = result["map_s"]
    lines = [
        "# Where the last-layer LA's prediction time over MAP goes (Laplace Redux Table 3)", "",
        f"- Command: `{' '.join(['python -m bench.benchmarks.la_prediction', *argv])}`",
        f"- Git: {info['sha']}",
        f"- Machine: {info['cpu']}; torch threads {info['threads']}; torch {info['torch']}; "
        f"laplace-torch {info['laplace']}; device {device}; load average at start "
        f"{info['load']} (shared machine: timings are noisy)",
        f"- Run: Redux LeNet ({result['n_parameters']:,} parameters, {result['dtype']}, seeded "
        f"random weights), Table 3's LA row (conf/method/laplace_classifier.yaml, variant LA: "
        f"last-layer K-FAC, BackPackGGN, marglik prior precision "
        f"{result['prior_precision']:.3g}, GLM probit; {result['n_last']} last-layer "
        f"parameters) fitted on {cfg['n_train']} random inputs; {result['n']} standard normal "
        f"MNIST-shaped test inputs in chunks of {result['chunk']}; medians of "
        f"{cfg['repeats']} interleaved rounds after one warm-up round"
        + (" — QUICK smoke run, numbers not meaningful" if quick else ""), "",
        "## LA against MAP, same inputs, same run", "",
        "| prediction | seconds | / MAP |", "|---|---|---|",
        f"| MAP: forward without gradients, softmax | {map_s:.4f} | 1.00x |",
        f"| LA: `method.predict` (GLM probit) | {total:.4f} | {total / map_s:.2f}x |", "",
        "## The LA's prediction, step by step", "",
        "| step | seconds | share of the steps | / MAP |", "|---|---|---|---|",
        *[f"| {label} | {seconds:.4f} | {share(seconds, steps_total)} | "
          f"{seconds / map_s:.2f}x |" for label, seconds in rows],
        f"| sum of the steps | {steps_total:.4f} | 100.0% | {steps_total / map_s:.2f}x |", "",
        f"The LA's total timed on its own minus the steps' sum: {total - steps_total:+.4f} s "
        "(laplace-torch's argument checks and dispatch, and timing noise). The steps "
        "reassembled give probabilities "
        + ("equal to" if result["steps_equal"] else "DIFFERENT from")
        + " `method.predict`'s (torch.equal).", "",
        f"Cause of the anchor: {quotable_split(result)}.", "",
        "## What two changes that keep the numbers would give (not used by the method)", "",
        "| step | seconds | / MAP |", "|---|---|---|",
        *[f"| {label} | {seconds:.4f} | {seconds / map_s:.2f}x |" for label, seconds in (
            ("input to the network's device and dtype", result["fixed"]["input"]),
            ("feature forward under torch.no_grad", result["fixed"]["features"]),
            ("diagonal of the functional variance from the Kronecker eigendecomposition, no "
             "Jacobians", result["fixed"]["variance"]),
            ("probit scaling and softmax", result["fixed"]["probit"]),
            ("concatenate into a Categorical", result["fixed"]["collect"]),
            ("total", fixed_total))], "",
        f"Largest relative difference of the diagonal variance to laplace-torch's: "
        f"{result['variance_gap']:.1e}; largest absolute difference of the probabilities: "
        f"{result['fixed_gap']:.1e} ({result['dtype']} rounding). LA / MAP with both changes: "
        f"{fixed_total / map_s:.2f}x (against {total / map_s:.2f}x).", "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write the report."""
    parser = sized_parser(__doc__.split("\n")[0], SIZES, device=True)
    args = parser.parse_args(argv)
    cfg = chosen_sizes(args, QUICK, FULL, SIZES)
    if min(cfg.values()) < 1:
        parser.error("--n-test, --n-train and --repeats must be positive")
    torch.set_num_threads(args.threads)
    info = machine()
    result = measure(cfg, args.device)
    publish(render(sys.argv[1:] if argv is None else argv, cfg, info, args.device, result,
                   args.quick), args.out)


if __name__ == "__main__":
    main()
