"""Why Nesterov SGD at lr 0.1 does not train Laplace Redux's LeNet (map-recipe study,
``sgd_nesterov_b512``: training objective ln 10 from the first epoch).

``python -m bench.benchmarks.nesterov_lenet [--steps 118] [--seed 6] [--quick] [--out FILE]``
prints (or writes to ``FILE``) a Markdown report. Each variant starts from the LeNet the
recipe starts from (``lenet_redux``, the store's initial weights of ``--seed``), draws the
same minibatches (the store's minibatch generator of ``--seed``, batch 512, MNIST training
set, pixels in [0, 1]) and takes ``--steps`` optimizer steps (118 = one epoch of 60k; the
recipe's cosine schedule is per epoch, so its lr is 0.1 throughout the first epoch). Per step
it records the minibatch loss, the gradient norm before any clipping and whether any value is
non-finite; at chosen steps, on a fixed probe of 1,024 training images, the weight norm of
each layer, the share of dead ReLU units (zero on every probe image) per layer, the spread of
the logits over the probe and the mean largest softmax probability.

Variants, one factor each against ``sgd_nesterov_b512`` (SGD, momentum 0.9, Nesterov, lr 0.1,
weight decay 5e-4): gradient-norm clipping at 1, lr 0.03 and 0.01, no momentum, the initial
weights of two other seeds, He-normal (fan-in) initial weights, a linear warm-up over the
epoch, and the text's Adam at lr 0.1 beside the code's Adam at 1e-3.
``--quick`` shrinks the sizes (CI smoke); its numbers are not meaningful.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from bench.datasets.image_classification import ImageClassificationData
from bench.harness.rng import derived_seed, make_generator
from bench.models.classifiers import build_classifier

BATCH = 512
PROBE = 1024
FULL = {"steps": 118}
QUICK = {"steps": 3}


@dataclass(frozen=True)
class Variant:
    """One training variant: optimizer settings, clipping, warm-up and initial weights."""

    name: str
    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.9
    nesterov: bool = True
    weight_decay: float = 5e-4
    clip: float | None = None
    warmup: bool = False
    init_seed: int | None = None
    he_init: bool = False


VARIANTS = (
    Variant("sgd_nesterov_b512 (SGD 0.9 Nesterov, lr 0.1)"),
    Variant("clip grad norm at 1", clip=1.0),
    Variant("lr 0.03", lr=0.03),
    Variant("lr 0.01", lr=0.01),
    Variant("no momentum (plain SGD, lr 0.1)", momentum=0.0, nesterov=False),
    Variant("initial weights of seed 12", init_seed=12),
    Variant("initial weights of seed 13", init_seed=13),
    Variant("He-normal (fan-in) initial weights", he_init=True),
    Variant("linear lr warm-up over the epoch", warmup=True),
    Variant("Adam, lr 0.1 (adam_lr01_b512)", optimizer="adam", momentum=0.0, nesterov=False),
    Variant("Adam, lr 1e-3 (adam_b512)", optimizer="adam", lr=1e-3, momentum=0.0,
            nesterov=False),
)


@dataclass
class Trace:
    """What one variant measured: per step loss, gradient norm and finiteness; at probe steps
    the layer weight norms, dead-unit shares, logit spread and mean confidence."""

    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    non_finite_step: int | None = None
    probes: dict[int, dict] = field(default_factory=dict)


def initial_network(seed: int, he_init: bool) -> nn.Module:
    """The store's initial LeNet of ``seed`` (``fresh_network``'s stream), or the same layout
    with He-normal fan-in weights and zero biases drawn from that stream."""
    generator = make_generator(derived_seed(seed, spawn_key=(0,)))
    module = build_classifier("lenet_redux", generator, num_classes=10, in_channels=1)
    if he_init:
        for layer in module.modules():
            if isinstance(layer, nn.Conv2d | nn.Linear):
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu", generator=generator)
                nn.init.zeros_(layer.bias)
    return module


def weighted_layers(module: nn.Module) -> list[tuple[str, nn.Module]]:
    """The conv and linear layers, named."""
    return [(name, layer) for name, layer in module.named_modules()
            if isinstance(layer, nn.Conv2d | nn.Linear)]


@torch.no_grad()
def probe(module: nn.Module, images: torch.Tensor) -> dict:
    """Layer weight norms, dead-ReLU shares (units zero on every probe image), logit spread
    (mean over classes of the logits' sd over the probe) and mean largest probability."""
    dead: dict[str, float] = {}

    def hook(name: str) -> Callable:
        def record(_module, _inputs, output):
            flat = output.transpose(0, 1).reshape(output.shape[1], -1) if output.ndim == 4 \
                else output.transpose(0, 1)
            dead[name] = float((flat.amax(dim=1) <= 0).double().mean())
        return record

    handles = [layer.register_forward_hook(hook(name)) for name, layer in module.named_modules()
               if isinstance(layer, nn.ReLU)]
    logits = module(images)
    for handle in handles:
        handle.remove()
    probs = logits.softmax(dim=1)
    return {"weight_norms": {name: float(layer.weight.norm())
                             for name, layer in weighted_layers(module)},
            "dead_relu": dead,
            "logit_sd": float(logits.std(dim=0).mean()),
            "confidence": float(probs.max(dim=1).values.mean()),
            "finite": bool(torch.isfinite(logits).all())}


def optimizer_for(variant: Variant, module: nn.Module) -> torch.optim.Optimizer:
    """The variant's optimizer (weight decay in the optimizer, as the recipes put it)."""
    if variant.optimizer == "adam":
        return torch.optim.Adam(module.parameters(), lr=variant.lr,
                                weight_decay=variant.weight_decay)
    return torch.optim.SGD(module.parameters(), lr=variant.lr, momentum=variant.momentum,
                           nesterov=variant.nesterov, weight_decay=variant.weight_decay)


def run_variant(variant: Variant, images: torch.Tensor, labels: torch.Tensor, seed: int,
                steps: int, probe_steps: set[int]) -> Trace:
    """``steps`` steps of the variant from the seed's initial weights and minibatch order."""
    module = initial_network(variant.init_seed if variant.init_seed is not None else seed,
                             variant.he_init)
    module.train()
    optimizer = optimizer_for(variant, module)
    order = make_generator(derived_seed(seed, spawn_key=(1,)))
    permutation = torch.randperm(len(images), generator=order)
    probe_images = images[:PROBE]
    trace = Trace()
    trace.probes[0] = probe(module, probe_images)
    for step in range(steps):
        if variant.warmup:
            for group in optimizer.param_groups:
                group["lr"] = variant.lr * (step + 1) / steps
        rows = permutation[(step * BATCH) % len(images):][:BATCH]
        loss = F.cross_entropy(module(images[rows]), labels[rows])
        optimizer.zero_grad()
        loss.backward()
        grads = [p.grad for p in module.parameters()]
        norm = float(torch.sqrt(sum(g.pow(2).sum() for g in grads)))
        trace.losses.append(float(loss.detach()))
        trace.grad_norms.append(norm)
        if trace.non_finite_step is None and not (math.isfinite(trace.losses[-1])
                                                  and math.isfinite(norm)):
            trace.non_finite_step = step + 1
        if variant.clip is not None:
            nn.utils.clip_grad_norm_(module.parameters(), variant.clip)
        optimizer.step()
        if step + 1 in probe_steps:
            trace.probes[step + 1] = probe(module, probe_images)
    return trace


def report(traces: dict[str, Trace], steps: int, seed: int, probe_steps: list[int]) -> str:
    """The Markdown report: one table of losses and gradient norms, one of probes."""
    shown = sorted({s for s in (1, 2, 3, 5, 10, 20, steps) if s <= steps})
    lines = [f"# Nesterov SGD lr 0.1 on the Laplace Redux LeNet: the first {steps} steps",
             "", f"Model seed {seed}, MNIST training set, batch {BATCH}, generated by "
             "`python -m bench.benchmarks.nesterov_lenet` (module docstring).", "",
             "## Minibatch loss (nats) after step k, gradient norm before step k",
             "", "| variant | " + " | ".join(f"loss {k}" for k in shown)
             + " | grad norm " + " | grad norm ".join(str(k) for k in (1, 2, 3)) + " | max grad"
             " norm (step) | first non-finite step |",
             "|---" * (len(shown) + 6) + "|"]
    for name, trace in traces.items():
        losses = [f"{trace.losses[k - 1]:.4g}" for k in shown]
        norms = [f"{trace.grad_norms[k - 1]:.4g}" for k in (1, 2, 3) if k <= steps]
        peak = max(range(len(trace.grad_norms)), key=trace.grad_norms.__getitem__)
        lines.append(f"| {name} | " + " | ".join(losses + norms)
                     + f" | {trace.grad_norms[peak]:.4g} ({peak + 1}) | "
                     f"{trace.non_finite_step or 'none'} |")
    lines += ["", "## Probe (1,024 training images): dead ReLU share per layer, logit sd, "
              "mean confidence, weight norm of each layer", ""]
    for name, trace in traces.items():
        lines += [f"### {name}", "", "| step | dead ReLU (conv1, conv2, fc1, fc2) | logit sd | "
                  "confidence | weight norms (conv1, conv2, fc1, fc2, fc3) | finite |",
                  "|---|---|---|---|---|---|"]
        for step in [0, *probe_steps]:
            if step not in trace.probes:
                continue
            p = trace.probes[step]
            dead = ", ".join(f"{v:.2f}" for v in p["dead_relu"].values())
            norms = ", ".join(f"{v:.3g}" for v in p["weight_norms"].values())
            lines.append(f"| {step} | {dead} | {p['logit_sd']:.3g} | {p['confidence']:.3f} | "
                         f"{norms} | {p['finite']} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run every variant and print or write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=FULL["steps"])
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    steps = QUICK["steps"] if args.quick else args.steps
    if steps <= 0:
        parser.error(f"--steps={steps} is not valid; it must be a positive integer")
    data = ImageClassificationData(name="mnist", images="mnist")
    splits = data.splits(0)
    images, labels = splits.x_train, splits.y_train
    probe_steps = sorted({s for s in (1, 2, 3, 5, 10, 20, 25, 30, 35, 40, 50, steps)
                          if s <= steps})
    torch.manual_seed(derived_seed(args.seed, spawn_key=(2,)))
    traces = {variant.name: run_variant(variant, images, labels, args.seed, steps,
                                        set(probe_steps))
              for variant in VARIANTS}
    text = report(traces, steps, args.seed, probe_steps)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")
    else:
        sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
