"""Two moons (GGN thesis, Section 5.1): scikit-learn's ``make_moons`` as the companion code
draws it (notes 2.2): noise 0.3, 150 training points with ``random_state`` 6, 1000 test points
with ``random_state`` 5, labels 0 / 1, nothing scaled."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from sklearn.datasets import make_moons

from bench.datasets.train_test import TrainTest
from bench.harness.errors import ConfigError, require_positive


@dataclass
class TwoMoonsData:
    """Settings of the two-moons toy; :meth:`splits` draws the fixed train/test sets (the
    job seed drives only initialisation and Monte Carlo draws)."""

    name: str = "two_moons"
    n_train: int = 150
    n_test: int = 1000
    noise: float = 0.3
    train_seed: int = 6
    test_seed: int = 5
    plot_low: tuple[float, float] = (-2.0, -1.75)
    plot_high: tuple[float, float] = (3.0, 2.25)
    plot_points: int = 60

    def __post_init__(self) -> None:
        for key in ("n_train", "n_test", "noise", "plot_points"):
            require_positive(f"dataset.{key}", getattr(self, key))
        if not all(lo < hi for lo, hi in zip(self.plot_low, self.plot_high, strict=True)):
            raise ConfigError(f"dataset.plot_low={list(self.plot_low)} must be below "
                              f"dataset.plot_high={list(self.plot_high)} in both coordinates")

    def splits(self, seed: int | None = None) -> TrainTest:
        """Training and test sets as float64 tensors, labels 0. / 1.

        ``seed`` is accepted for the datasets' common ``splits(seed)`` and ignored: the
        thesis's sets are fixed by ``train_seed`` and ``test_seed``."""
        return TrainTest.drawn(
            self.name, lambda seed, n: make_moons(n_samples=n, noise=self.noise,
                                                  random_state=seed),
            (self.train_seed, self.n_train), (self.test_seed, self.n_test))

    def plot_axes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The contour grid's two axes, ``plot_points`` values each."""
        return tuple(torch.linspace(lo, hi, self.plot_points, dtype=torch.float64)
                     for lo, hi in zip(self.plot_low, self.plot_high, strict=True))

    def plot_inputs(self) -> torch.Tensor:
        """The contour grid's inputs ``[plot_points^2, 2]`` (first coordinate fastest)."""
        first, second = self.plot_axes()
        grid_second, grid_first = torch.meshgrid(second, first, indexing="ij")
        return torch.stack([grid_first.reshape(-1), grid_second.reshape(-1)], dim=1)
