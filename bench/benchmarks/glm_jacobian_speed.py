"""Speed of the GLM predictive's Jacobians: laplace-torch's whole-batch ``jacrev`` against one
input at a time (:func:`bench.curvature.jacobians.logit_jacobians`).

``python -m bench.benchmarks.glm_jacobian_speed [--images 32] [--wrn-images 16] [--repeats 5]
[--threads 1] [--quick] [--out FILE]`` prints (or writes to ``FILE``) a Markdown report. For
the networks whose all-weights Laplace the Laplace Redux Figure 8 grid fits (LeNet on MNIST at
the cpu scale's prediction batch of 32; WRN-16-1, the CIFAR smoke stand-in, at its batch of 16)
it times, alternated in one run with :func:`bench.harness.timing.timed`:

* library: ``AsdlGGN(...).functorch_jacobians(x)``, what laplace-torch 0.3's GLM predictive
  calls for the ASDL backends (``jacrev`` of the whole batch's logits);
* per input: ``logit_jacobians``, which the harness's predictive uses
  (:mod:`bench.methods.laplace.glm_jacobians`);

and checks that both give the same Jacobians. ``--quick`` shrinks the sizes (CI smoke); its
numbers are not meaningful.
"""

from __future__ import annotations

import sys

import torch

from bench.benchmarks.command_line import parsed_sizes
from bench.benchmarks.network_ssla import machine, publish
from bench.curvature.jacobians import logit_jacobians
from bench.harness.timing import timed
from bench.models.classifiers import build_classifier

FULL = {"images": 32, "wrn_images": 16, "repeats": 5}
QUICK = {"images": 4, "wrn_images": 2, "repeats": 1}
SIZES = {"images": "LeNet inputs per batch", "wrn_images": "WRN-16-1 inputs per batch",
         "repeats": "timed calls of each path (median)"}
NETWORKS = (("LeNet (Laplace Redux), MNIST", "lenet_redux", (1, 28, 28), {}, "images"),
            ("WRN-16-1, CIFAR-10 (smoke stand-in)", "wrn16_4", (3, 32, 32), {"widen": 1},
             "wrn_images"))


def bench_network(name: str, shape: tuple[int, ...], options: dict, n: int,
                  repeats: int) -> dict:
    """Median seconds of both paths on ``n`` inputs, and their largest difference."""
    from laplace.curvature import AsdlGGN

    net = build_classifier(name, torch.Generator().manual_seed(0), **options).eval()
    backend = AsdlGGN(net, "classification")
    x = torch.randn(n, *shape, generator=torch.Generator().manual_seed(1))

    def library():
        return backend.functorch_jacobians(x)[0]

    def per_input():
        return logit_jacobians(net, backend.params_dict, backend.buffers_dict, x)[0]

    library(), per_input()  # warm-up: lazy initialisation and allocator caches
    library_s, per_input_s = [], []
    for _ in range(repeats):  # alternated, so both see the same machine
        seconds, expected = timed(library, 1, warmup=0)
        library_s.append(seconds)
        seconds, got = timed(per_input, 1, warmup=0)
        per_input_s.append(seconds)
    return {"library_s": sorted(library_s)[len(library_s) // 2],
            "per_input_s": sorted(per_input_s)[len(per_input_s) // 2],
            "max_abs_difference": float((got - expected).abs().max()),
            "largest_entry": float(expected.abs().max()),
            "parameters": int(expected.shape[-1])}


def render(argv: list[str], info: dict, results: dict[str, dict]) -> str:
    """The Markdown report."""
    lines = [
        "# GLM predictive Jacobians: laplace-torch's whole batch vs one input at a time", "",
        f"Command: `python -m bench.benchmarks.glm_jacobian_speed {' '.join(argv)}`".rstrip()
        + "  ",
        f"Commit {info['sha']} · {info['cpu']} · {info['threads']} torch thread(s) · "
        f"torch {info['torch']} · laplace-torch {info['laplace']} · load {info['load']}", "",
        "| network | inputs | parameters | library s | per input s | speed-up | "
        "largest difference |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, result in results.items():
        ratio = result["library_s"] / result["per_input_s"]
        lines.append(
            f"| {label} | {result['inputs']} | {result['parameters']} | "
            f"{result['library_s']:.3f} | {result['per_input_s']:.3f} | {ratio:.1f}x | "
            f"{result['max_abs_difference']:.1e} (largest entry "
            f"{result['largest_entry']:.2f}) |")
    lines += [
        "",
        "Medians of alternated calls, after one untimed call of each. The library path runs each "
        "of the inputs x classes backward rows through every input of the batch, so its cost "
        "grows with the square of the batch; one input at a time grows linearly. Both give "
        "the same Jacobians (last column).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write the report."""
    args, cfg = parsed_sizes(__doc__.split("\n")[0], SIZES, QUICK, FULL, argv)
    info = machine()
    results = {}
    for label, name, shape, options, size in NETWORKS:
        result = bench_network(name, shape, options, cfg[size], cfg["repeats"])
        results[label] = {**result, "inputs": cfg[size]}
    publish(render(sys.argv[1:] if argv is None else argv, info, results), args.out)


if __name__ == "__main__":
    main()
