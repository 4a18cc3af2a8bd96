"""The noise standard deviation of a Gaussian regression likelihood, fitted on held-out data.

Laplace Redux's PovertyMap protocol (reproduction notes section 6; the authors'
``optimize_noise_standard_deviation``): Adam with lr 0.1 on ``log sigma`` from sigma = 1, one
step per minibatch of the validation set (in loader order), 10 epochs, each step on the mean
Gaussian NLL of the batch with the network's predictions as means. Computed here in float64 on
the CPU from the predictions, which gives the same steps as recomputing them per batch.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bench.harness.errors import ConfigError, require_positive


def gaussian_nll(mean: Tensor, targets: Tensor, sd: Tensor) -> Tensor:
    """Mean of ``-log N(targets | mean, sd^2)`` (the full NLL, with the 2 pi term)."""
    variance = sd**2
    return 0.5 * (torch.log(2 * math.pi * variance) + (targets - mean) ** 2 / variance).mean()


def fit_noise_sd(mean: Tensor, targets: Tensor, lr: float = 0.1, epochs: int = 10,
                 batch_size: int = 64, initial_sd: float = 1.0) -> float:
    """sigma after ``epochs`` passes of Adam over minibatches of ``(mean, targets)``."""
    require_positive("method.noise.lr", lr)
    require_positive("method.noise.initial_sd", initial_sd)
    for key, value in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"method.noise.{key}={value!r} is not valid; it must be a "
                              "positive integer")
    mean = mean.detach().double().reshape(-1).cpu()
    targets = targets.detach().double().reshape(-1).cpu()
    log_sd = torch.tensor(math.log(initial_sd), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([log_sd], lr=lr)
    for _ in range(epochs):
        for start in range(0, len(mean), batch_size):
            optimizer.zero_grad()
            loss = gaussian_nll(mean[start:start + batch_size],
                                targets[start:start + batch_size], log_sd.exp())
            loss.backward()
            optimizer.step()
    return float(log_sd.detach().exp())
