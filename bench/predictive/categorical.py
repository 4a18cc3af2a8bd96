"""The categorical predictive of a classifier: class probabilities per test point."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Categorical:
    """Predictive class probabilities ``probs`` ``[n, C]`` (rows sum to one).

    Methods that average over parameter draws (NN sampling, ensembles, MC) hand over the
    average of the per-draw softmax outputs; metrics in :mod:`bench.metrics` read only this.
    """

    probs: Tensor

    def __post_init__(self) -> None:
        if self.probs.ndim != 2:
            shape = tuple(self.probs.shape)
            raise ValueError(f"Categorical.probs must be [n, classes], got {shape}")

    @classmethod
    def from_logits(cls, logits: Tensor) -> Categorical:
        """The softmax of ``logits`` ``[n, C]``."""
        return cls(torch.softmax(logits, dim=-1))

    @classmethod
    def mean_of(cls, probs: Tensor) -> Categorical:
        """Average of per-draw probabilities ``[S, n, C]`` over the draws."""
        return cls(probs.mean(dim=0))

    @property
    def n_classes(self) -> int:
        """Number of classes C."""
        return self.probs.shape[-1]

    def predicted_class(self) -> Tensor:
        """Argmax class per point ``[n]``."""
        return self.probs.argmax(dim=-1)

    def confidence(self) -> Tensor:
        """Largest class probability per point ``[n]``."""
        return self.probs.max(dim=-1).values

    def log_prob(self, y: Tensor) -> Tensor:
        """Log probability of the integer labels ``y`` ``[n]`` (clamped away from log 0)."""
        picked = self.probs.gather(-1, y.long().unsqueeze(-1)).squeeze(-1)
        return picked.clamp_min(torch.finfo(self.probs.dtype).tiny).log()

    def entropy(self) -> Tensor:
        """Entropy in nats per point ``[n]`` (0 log 0 = 0)."""
        p = self.probs
        return -torch.special.xlogy(p, p).sum(dim=-1)
