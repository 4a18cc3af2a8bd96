"""Temperature scaling (Guo et al. 2017): one temperature T for the logits, fitted on held-out
data by minimising the mean negative log-likelihood of ``softmax(logits / T)``.

Laplace Redux fitted it with pycalib's ``TemperatureScaling`` on the WILDS validation logits
(reproduction notes section 6); this is our own small implementation: L-BFGS (strong Wolfe
line search) on ``log T`` from T = 1, in float64. The NLL is convex in 1/T, so the minimum is
unique; the tests check it against the closed form of a two-class case and a dense grid.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bench.harness.errors import ConfigError


def temperature_nll(logits: Tensor, labels: Tensor, temperature: float | Tensor) -> Tensor:
    """Mean NLL of the integer ``labels`` under ``softmax(logits / temperature)``."""
    return torch.nn.functional.cross_entropy(logits / temperature, labels.long())


def fit_temperature(logits: Tensor, labels: Tensor, max_iter: int = 200,
                    tolerance: float = 1e-10) -> float:
    """The temperature minimising :func:`temperature_nll` on ``(logits, labels)``."""
    if logits.ndim != 2 or len(logits) != len(labels) or len(labels) == 0:
        raise ConfigError(f"temperature scaling needs logits [n, classes] and n labels; got "
                          f"{tuple(logits.shape)} and {tuple(labels.shape)}")
    logits, labels = logits.detach().double().cpu(), labels.detach().long().cpu()
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([log_t], lr=1.0, max_iter=max_iter,
                                  tolerance_grad=tolerance, tolerance_change=tolerance,
                                  line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = temperature_nll(logits, labels, log_t.exp())
        loss.backward()
        return loss

    optimizer.step(closure)
    temperature = float(log_t.detach().exp())
    if not math.isfinite(temperature) or temperature <= 0:
        raise RuntimeError(f"temperature scaling diverged (T = {temperature})")
    return temperature
