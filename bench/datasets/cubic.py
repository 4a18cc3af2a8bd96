"""The cubic toy regression of Hernandez-Lobato & Adams (2015): ``y = x^3 + eps``.

The Generalized Laplace paper (Figure 2) draws 100 points with ``x ~ U(-4, 4)`` and
``eps ~ N(0, 9)``; the 9 is read as a variance (sd 3), as in the original toy. The paper gives
no seed; every draw here comes from a generator seeded by the job's seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import ConfigError, require_positive


@dataclass(frozen=True)
class CubicToy:
    """One draw of the toy: training pairs, and the plotting grid (``x_test``) with its true
    function."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    f_test: Tensor


@dataclass
class CubicToyData:
    """Settings of the cubic toy; :meth:`draw` makes the data of one seed (float64)."""

    name: str = "cubic_toy"
    n_points: int = 100
    x_low: float = -4.0
    x_high: float = 4.0
    noise_variance: float = 9.0
    plot_low: float = -6.0
    plot_high: float = 6.0
    plot_points: int = 241

    def __post_init__(self) -> None:
        require_positive("dataset.n_points", self.n_points)
        require_positive("dataset.noise_variance", self.noise_variance)
        require_positive("dataset.plot_points", self.plot_points)
        if not self.x_low < self.x_high:
            raise ConfigError(f"dataset.x_low={self.x_low} must be below dataset.x_high="
                              f"{self.x_high}")

    def splits(self, seed: int) -> CubicToy:
        """Inputs uniform on ``[x_low, x_high]``, then the noise, from one seeded generator."""
        generator = torch.Generator().manual_seed(int(seed))
        width = self.x_high - self.x_low
        x = self.x_low + width * torch.rand(self.n_points, 1, generator=generator,
                                            dtype=torch.float64)
        noise = self.noise_variance**0.5 * torch.randn(self.n_points, generator=generator,
                                                        dtype=torch.float64)
        x_test = torch.linspace(self.plot_low, self.plot_high, self.plot_points,
                                dtype=torch.float64).unsqueeze(1)
        return CubicToy(x, x[:, 0] ** 3 + noise, x_test, x_test[:, 0] ** 3)
