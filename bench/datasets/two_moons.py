"""Two moons (GGN thesis, Section 5.1): scikit-learn's ``make_moons`` as the companion code
draws it (notes 2.2): noise 0.3, 150 training points with ``random_state`` 6, 1000 test points
with ``random_state`` 5, labels 0 / 1, nothing scaled."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.datasets import make_moons

from bench.datasets.train_test import FixedToySets
from bench.harness.errors import ConfigError, require_positive


@dataclass
class TwoMoonsData(FixedToySets):
    """Settings of the two-moons toy; :meth:`splits` draws the fixed train/test sets, labels
    0. / 1."""

    name: str = "two_moons"
    noise: float = 0.3
    plot_low: tuple[float, float] = (-2.0, -1.75)
    plot_high: tuple[float, float] = (3.0, 2.25)
    plot_points: int = 60

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("noise", "plot_points"):
            require_positive(f"dataset.{key}", getattr(self, key))
        if not all(lo < hi for lo, hi in zip(self.plot_low, self.plot_high, strict=True)):
            raise ConfigError(f"dataset.plot_low={list(self.plot_low)} must be below "
                              f"dataset.plot_high={list(self.plot_high)} in both coordinates")

    def draw(self, seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """scikit-learn's ``make_moons`` of ``n`` points with ``random_state=seed``."""
        return make_moons(n_samples=n, noise=self.noise, random_state=seed)

    def plot_axes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The contour grid's two axes, ``plot_points`` values each."""
        return tuple(torch.linspace(lo, hi, self.plot_points, dtype=torch.float64)
                     for lo, hi in zip(self.plot_low, self.plot_high, strict=True))

    def plot_inputs(self) -> torch.Tensor:
        """The contour grid's inputs ``[plot_points^2, 2]`` (first coordinate fastest)."""
        first, second = self.plot_axes()
        grid_second, grid_first = torch.meshgrid(second, first, indexing="ij")
        return torch.stack([grid_first.reshape(-1), grid_second.reshape(-1)], dim=1)
