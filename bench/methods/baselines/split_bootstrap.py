"""Non-Laplace interval baselines of the subnetwork paper's Experiment 2 (Appendix B, D).

Both return ``(lower, upper)`` bounds for the mean function ``f(x*)`` at test inputs, from a
``fit(x, y, generator) -> predict`` callable (e.g. :func:`bench.training.working_network.
mean_function_fitter`), so they work with any model.

* Split (Kuchibhotla, Balakrishnan, Wasserman 2023, "HulC"): the training data are split at
  random into ``d`` disjoint parts of (almost) equal size, one model is fitted on each, and the
  interval is ``[min, max]`` of the ``d`` predictions. Appendix D says "we split the *test*
  data into d = 8 parts"; Appendix B (and HulC) split the training data, which we follow.
* Ensemble (bootstrap; Lakshminarayanan et al. 2017, Osband et al. 2016): ``B = 20`` bootstrap
  resamples of the training data, each of the training-set size, one model per resample, and
  the 2.5% / 97.5% empirical quantiles of the ``B`` predictions (``torch.quantile``'s linear
  interpolation, numpy's default).

Each refit goes through ``fit`` unchanged, so with :func:`~bench.training.working_network.
mean_function_fitter` it also holds out 10% of its part or resample for validation. Appendix D
"adjust[s] the learning rate" for the smaller Split parts without giving it: pass a fitter
with the schedule wanted.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

Fitter = Callable[[Tensor, Tensor, torch.Generator], Callable[[Tensor], Tensor]]


def split_interval(x: Tensor, y: Tensor, x_test: Tensor, fit: Fitter,
                   generator: torch.Generator, n_splits: int = 8) -> tuple[Tensor, Tensor]:
    """Split method: ``[min, max]`` over models fitted on ``n_splits`` disjoint parts."""
    parts = torch.randperm(x.shape[0], generator=generator).tensor_split(n_splits)
    predictions = torch.stack([fit(x[part], y[part], generator)(x_test) for part in parts])
    return predictions.min(0).values, predictions.max(0).values


def bootstrap_interval(x: Tensor, y: Tensor, x_test: Tensor, fit: Fitter,
                       generator: torch.Generator, n_models: int = 20,
                       level: float = 0.95) -> tuple[Tensor, Tensor]:
    """Bootstrap ensemble: central ``level`` quantile interval of ``n_models`` refits."""
    n = x.shape[0]
    predictions = []
    for _ in range(n_models):
        rows = torch.randint(n, (n,), generator=generator)
        predictions.append(fit(x[rows], y[rows], generator)(x_test))
    stacked = torch.stack(predictions)
    tail = (1 - level) / 2
    probabilities = torch.tensor([tail, 1 - tail], dtype=stacked.dtype)
    lower, upper = torch.quantile(stacked, probabilities, dim=0)
    return lower, upper
