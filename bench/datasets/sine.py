"""Lightning-UQ-Box's toy sine data (SSLA Tables 5-6, notes §8), redrawn with an explicit RNG.

``lightning_uq_box.datamodules.ToySineDatamodule`` (0.2.0) takes no seed: it draws its noise
from torch's global generator. :class:`ToySineData` repeats its arithmetic step for step
(float32 ``linspace`` inputs, two ``randn`` noise vectors zeroed on either side of the gap,
``y = sin(x) + noise``) with a generator passed in, so ``draw(torch.Generator().manual_seed(s))``
equals the datamodule built after ``torch.manual_seed(s)`` without touching global state (and
without importing lightning, which costs seconds).

The datamodule drops the middle 20 % of the inputs (the gap) from training and tests on a
noise-free extended line; the SSLA tables' integer per-run coverages point to 100 noisy test
points instead, so :meth:`ToySineData.split` holds out ``n_test`` random points of the
non-gap data (inference, see conf/experiment/ssla/table-5.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import ConfigError, require_positive

GAP_START_FRACTION = 0.4
GAP_END_FRACTION = 0.6


@dataclass(frozen=True)
class SineSplit:
    """Training and test points (1-D inputs, float32 as drawn) and the dropped gap inputs."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    x_gap: Tensor


@dataclass
class ToySineData:
    """``ToySineDatamodule`` data: sd ``sigma_noise_1`` left of the gap, ``sigma_noise_2`` right.

    Equal sds give the homoscedastic variant. ``n_test`` points of the non-gap data are held
    out as the test set; the rest is the training set.
    """

    name: str
    n_data: int = 500
    sigma_noise_1: float = 0.1
    sigma_noise_2: float = 0.4
    x_min: float = -2.0
    x_max: float = 15.0
    n_test: int = 100

    @property
    def gap(self) -> tuple[float, float]:
        """Open interval of inputs the datamodule drops (40 % to 60 % of the x range)."""
        span = self.x_max - self.x_min
        return (self.x_min + GAP_START_FRACTION * span, self.x_min + GAP_END_FRACTION * span)

    def draw(self, rng: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        """All ``n_data`` inputs, their targets and the gap mask, as the datamodule draws them."""
        require_positive("dataset.n_data", self.n_data)
        x = torch.linspace(self.x_min, self.x_max, self.n_data).unsqueeze(-1)
        gap_start, gap_end = self.gap
        in_gap = ((x > gap_start) & (x < gap_end)).squeeze(-1)
        noise_1 = torch.randn(x.shape, generator=rng) * self.sigma_noise_1
        noise_1[x > gap_start] = 0
        noise_2 = torch.randn(x.shape, generator=rng) * self.sigma_noise_2
        noise_2[x < gap_end] = 0
        y = torch.sin(x) + (noise_1 + noise_2)
        return x.squeeze(-1), y.squeeze(-1), in_gap

    def split(self, rng: torch.Generator) -> SineSplit:
        """Draw the data, drop the gap, hold out ``n_test`` random points (same generator)."""
        x, y, in_gap = self.draw(rng)
        x_kept, y_kept = x[~in_gap], y[~in_gap]
        n_test = int(require_positive("dataset.n_test", self.n_test))
        if n_test >= x_kept.numel():
            raise ConfigError(f"dataset.n_test={n_test} must be below the {x_kept.numel()} "
                              "points outside the gap")
        order = torch.randperm(x_kept.numel(), generator=rng)
        test, train = order[:n_test].sort().values, order[n_test:].sort().values
        return SineSplit(x_kept[train], y_kept[train], x_kept[test], y_kept[test], x[in_gap])
