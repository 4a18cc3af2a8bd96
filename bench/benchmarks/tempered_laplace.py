"""Speed and memory of the tempered Laplace sampler (Generalized Laplace) on a LeNet-5.

``python -m bench.benchmarks.tempered_laplace [--n-test 10000] [--n-train 1000] [--samples 50]
[--device cpu] [--quick] [--out FILE]`` prints (or writes to ``FILE``) a Markdown report:

1. the NN-sampling predictive over ``n_test`` MNIST-sized inputs, ours
   (:class:`bench.methods.laplace.tempered.TemperedLaplace`, ``functional_call`` per draw;
   ``vmap`` over draws on CUDA)
   against laplace-torch's ``pred_type='nn'`` (one ``vector_to_parameters`` and forward per
   draw) on the same diagonal posterior (exact GGN on ``n_train`` inputs, prior precision 1,
   T = 1), both timed with :func:`bench.harness.timing.timed` in the same run;
2. the peak memory of each structure's curvature fit: ``torch.cuda.max_memory_allocated`` on
   CUDA; on the CPU the rise of the peak resident set size of a fresh process doing only
   that fit (torch's CPU allocations bypass ``tracemalloc``).

The network is LeNet-5 of the paper's Table 1 (61,706 parameters) at a seeded random
initialisation and the inputs are standard normal: timings and memory do not depend on the
weights' values. ``--quick`` shrinks every size (CI smoke); its numbers are not meaningful.
"""

from __future__ import annotations

import multiprocessing
import resource
import statistics
import sys
import threading
import time
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bench.benchmarks.command_line import chosen_sizes, sized_parser
from bench.benchmarks.network_ssla import machine, publish
from bench.harness.rng import make_generator
from bench.harness.timing import Stopwatch, timed
from bench.methods.laplace.tempered import TemperedLaplace

STRUCTURES = ("diag", "kfac", "ekfac")


def lenet5(seed: int = 0) -> nn.Module:
    """LeNet-5 (Generalized Laplace Table 1) at a seeded random initialisation."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10)).eval()


def mnist_sized(n: int, seed: int, device: str) -> SimpleNamespace:
    """``n`` standard normal ``[1, 28, 28]`` inputs with random labels."""
    generator = make_generator(seed)
    return SimpleNamespace(train_inputs=torch.randn(n, 1, 28, 28, generator=generator),
                           train_labels=torch.randint(0, 10, (n,), generator=generator))


def bench_predictive(cfg: dict, device: str) -> dict:
    """(1) Our vmapped NN-sampling predictive vs laplace-torch's ``pred_type='nn'``."""
    from laplace import Laplace
    from laplace.curvature import AsdlGGN

    train = mnist_sized(cfg["n_train"], 0, device)
    x = mnist_sized(cfg["n_test"], 1, device).train_inputs.to(device)
    ours = TemperedLaplace(structure="diag", fisher_type="type-2", n_samples=cfg["samples"],
                           batch_size=256, prediction={"batch_size": cfg["chunk"]}, device=device)
    ours.fit(SimpleNamespace(train_inputs=train.train_inputs[:8],
                             train_labels=train.train_labels[:8]), seed=0, base=lenet5())
    with Stopwatch() as ours_fit:
        ours.fit(train, seed=0, base=lenet5())
    la = Laplace(lenet5().to(device), "classification", subset_of_weights="all",
                 hessian_structure="diag", backend=AsdlGGN, prior_precision=1.0)
    loader = DataLoader(TensorDataset(train.train_inputs.to(device),
                                      train.train_labels.to(device)), batch_size=256)
    with Stopwatch() as la_fit:
        la.fit(loader)
    precision_gap = float((la.posterior_precision - ours.curvature.scaled(1.0, 1.0).diagonal()
                           .to(la.posterior_precision.dtype)).abs().max()
                          / la.posterior_precision.abs().max())
    ours_times, la_times = [], []
    for repeat in range(cfg["repeats"]):  # interleaved, so load drifts hit both sides alike
        seconds, ours_pred = timed(lambda: ours.predict(x), 1, warmup=int(repeat == 0))
        ours_times.append(seconds)
        seconds, la_pred = timed(lambda: la(x, pred_type="nn", link_approx="mc",
                                            n_samples=cfg["samples"]), 1,
                                 warmup=int(repeat == 0))
        la_times.append(seconds)
    ours_s, la_s = statistics.median(ours_times), statistics.median(la_times)
    gap = float((ours_pred.probs - la_pred.to(ours_pred.probs.device)).abs().mean())
    return {"ours_s": ours_s, "la_s": la_s, "ratio": la_s / ours_s, "ours_fit_s": ours_fit.seconds,
            "la_fit_s": la_fit.seconds, "precision_gap": precision_gap, "mean_prob_gap": gap}


def _resident_bytes() -> int:
    """This process's current resident set size (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


class _PeakResident:
    """Largest resident set size seen by a thread polling every ``interval_s`` while active."""

    def __init__(self, interval_s: float = 0.002):
        self.interval_s, self.peak = interval_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _resident_bytes())
            time.sleep(self.interval_s)

    def __enter__(self) -> _PeakResident:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _resident_bytes())


def _fit_peak(structure: str, cfg: dict, device: str, queue) -> None:
    """Child process: a warm-up fit on 8 inputs (lazy imports, allocator), then the timed
    fit; puts (peak bytes above the start of that fit, seconds)."""
    torch.set_num_threads(cfg["threads"])
    train = mnist_sized(cfg["n_train"], 0, device)
    warm = SimpleNamespace(train_inputs=train.train_inputs[:8],
                           train_labels=train.train_labels[:8])

    def method():
        return TemperedLaplace(structure=structure, fisher_type=cfg["fisher_type"],
                               mc_samples=cfg["mc_samples"], n_samples=cfg["samples"],
                               batch_size=128, device=device)

    method().fit(warm, seed=0, base=lenet5())
    net = lenet5()
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        with Stopwatch() as watch:
            method().fit(train, seed=0, base=net)
        peak = torch.cuda.max_memory_allocated(device) - start
    else:
        start = _resident_bytes()
        with _PeakResident() as resident, Stopwatch() as watch:
            method().fit(train, seed=0, base=net)
        peak = resident.peak - start
    queue.put((peak, watch.seconds))


def bench_memory(cfg: dict, device: str) -> dict:
    """(2) Peak memory and time of each structure's fit, each in a fresh process."""
    context = multiprocessing.get_context("spawn")
    out = {}
    for structure in STRUCTURES:
        queue = context.Queue()
        child = context.Process(target=_fit_peak, args=(structure, cfg, device, queue))
        child.start()
        out[structure] = queue.get()
        child.join()
    return out


FULL = {"n_test": 10000, "n_train": 1000, "samples": 50, "chunk": 1000, "repeats": 3,
        "fisher_type": "mc", "mc_samples": 30}
QUICK = {"n_test": 32, "n_train": 64, "samples": 4, "chunk": 16, "repeats": 1,
         "fisher_type": "type-2", "mc_samples": 1}
SIZES = {"n_test": "inputs of the predictive", "n_train": "inputs of the curvature fit",
         "samples": "posterior draws"}


def render(argv: list[str], cfg: dict, info: dict, device: str, pred: dict,
           memory: dict) -> str:
    """The Markdown report."""
    lines = [
        "# Tempered Laplace sampler: speed and memory (LeNet-5, 61,706 parameters)", "",
        f"- Command: `python -m bench.benchmarks.tempered_laplace {' '.join(argv)}`",
        f"- Git: {info['sha']}; machine: {info['cpu']}; torch threads {info['threads']}; "
        f"torch {info['torch']}; laplace-torch {info['laplace']}; device {device}; load "
        f"average at start {info['load']} (shared machine: timings are noisy)",
        f"- Sizes: {cfg}", "",
        "## NN-sampling predictive, same diagonal posterior (exact GGN, delta = 1, T = 1)", "",
        "| inputs | draws | ours (s) | laplace-torch `pred_type='nn'` (s) | laplace-torch / "
        "ours |", "|---|---|---|---|---|",
        f"| {cfg['n_test']} | {cfg['samples']} | {pred['ours_s']:.3f} | {pred['la_s']:.3f} | "
        f"{pred['ratio']:.2f}x ({'not slower' if pred['ratio'] >= 1 else 'SLOWER'}) |", "",
        f"Fits on {cfg['n_train']} inputs: ours {pred['ours_fit_s']:.2f} s, laplace-torch "
        f"(AsdlGGN, exact diagonal; its CurvlinopsGGN backend builds the dense GGN) "
        f"{pred['la_fit_s']:.2f} s; largest relative difference of the two posterior precisions"
        f" {pred['precision_gap']:.2e}; mean |p_ours - p_la| "
        f"{pred['mean_prob_gap']:.2e} (independent draws). Medians of {cfg['repeats']} calls "
        "of each side, interleaved, after one warm-up call each.", "",
        f"## Curvature fit per structure ({cfg['n_train']} inputs, fisher {cfg['fisher_type']}, "
        f"{cfg['mc_samples']} label samples, batch 128)", "",
        "| structure | peak memory (MiB) | fit (s) |", "|---|---|---|",
        *[f"| {s} | {peak / 2**20:.1f} | {seconds:.2f} |"
          for s, (peak, seconds) in memory.items()], "",
        "Peak memory: " + ("`torch.cuda.max_memory_allocated` above the allocation at the "
                           "start of the fit" if device.startswith("cuda") else
                           "peak resident set size (polled every 2 ms) above the start of the "
                           "fit, in a fresh process after a warm-up fit on 8 inputs") + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run both measurements and write the report."""
    args = sized_parser(__doc__.split("\n")[0], SIZES, device=True).parse_args(argv)
    cfg = chosen_sizes(args, QUICK, FULL, SIZES)
    torch.set_num_threads(args.threads)
    cfg["threads"] = args.threads
    info = machine()
    pred = bench_predictive(cfg, args.device)
    memory = bench_memory(cfg, args.device)
    report = render(sys.argv[1:] if argv is None else argv, cfg, info, args.device, pred, memory)
    publish(report, args.out)


if __name__ == "__main__":
    main()
