"""Snelson's 1-D regression toy with an artificial gap (GGN thesis, Section 5.1).

The thesis trains on "Snelson" with "an additional data gap" and says the observations have
"a noise variance of 0.09". The companion code (notes 2.1) does not use Snelson's 200 points:
it redraws data from a smooth mean function ``f_S`` fitted to them, a not-a-knot cubic spline
through 20 equally spaced nodes spanning the original training inputs' range
(``$BENCH_DATA_DIR/snelson/train_inputs``: 0.059167804 to 5.9657729). The node values are
the notes' (section 2.1) and are the only thing taken from Snelson's files.

Generator (seed ``s``, size ``n``), draw for draw as the companion code with NumPy's legacy
``RandomState`` (the same stream as seeding the global legacy RNG, without touching it):
``10 n`` uniforms give ``x`` on the node range, ``10 n`` standard normals give
``y = f_S(x) + 0.3 eps``; every point with ``gap_low < x < gap_high`` (1.5, 2.4) is removed and
the first ``n`` survivors are kept in draw order. Train: seed 6, n = 150; test: seed 5,
n = 1000 (the test set lacks the gap too). Nothing is standardised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.interpolate import CubicSpline

from bench.datasets.train_test import FixedToySets
from bench.harness.errors import ConfigError, require_positive

SNELSON_X_MIN = 0.059167804
SNELSON_X_MAX = 5.9657729
SNELSON_NODE_VALUES = (
    -0.1348986067, -0.4541505827, -0.9365516485, -1.4443177403, -1.7633941008,
    -1.7491499236, -1.2508610097, -0.3096546955, 0.3986662200, 0.5133206637,
    0.1583157149, -0.1863561524, 0.0186967832, 0.6120954819, 0.8748732844,
    0.4077682193, -0.5319199500, -0.8413421949, -0.4846338027, -0.1776965118,
)


def snelson_mean_function() -> CubicSpline:
    """``f_S``: the not-a-knot cubic spline through the 20 equally spaced nodes."""
    nodes = np.linspace(SNELSON_X_MIN, SNELSON_X_MAX, len(SNELSON_NODE_VALUES))
    return CubicSpline(nodes, np.asarray(SNELSON_NODE_VALUES), bc_type="not-a-knot")


def snelson_with_gap(seed: int, n: int, *, noise_sd: float = 0.3, gap_low: float = 1.5,
                     gap_high: float = 2.4) -> tuple[np.ndarray, np.ndarray]:
    """``n`` pairs ``(x, y)`` (float64 arrays) drawn as the module docstring says."""
    rng = np.random.RandomState(int(seed))
    x = SNELSON_X_MIN + (SNELSON_X_MAX - SNELSON_X_MIN) * rng.rand(10 * n)
    y = snelson_mean_function()(x) + noise_sd * rng.randn(10 * n)
    keep = ~((x > gap_low) & (x < gap_high))
    if keep.sum() < n:
        raise ConfigError(f"dataset: only {int(keep.sum())} of {10 * n} draws fall outside the "
                          f"gap ({gap_low}, {gap_high}); widen the range or narrow the gap")
    return x[keep][:n], y[keep][:n]


@dataclass
class SnelsonGapData(FixedToySets):
    """Settings of the Snelson-with-gap toy; :meth:`splits` draws the fixed train/test sets."""

    name: str = "snelson_gap"
    noise_variance: float = 0.09
    gap_low: float = 1.5
    gap_high: float = 2.4
    plot_low: float = 0.0
    plot_high: float = 6.0
    plot_points: int = 241

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("noise_variance", "plot_points"):
            require_positive(f"dataset.{key}", getattr(self, key))
        if not self.gap_low < self.gap_high:
            raise ConfigError(f"dataset.gap_low={self.gap_low} must be below "
                              f"dataset.gap_high={self.gap_high}")

    def draw(self, seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` inputs ``[n, 1]`` and targets ``[n]`` drawn from ``seed`` (module docstring)."""
        x, y = snelson_with_gap(seed, n, noise_sd=self.noise_variance**0.5,
                                gap_low=self.gap_low, gap_high=self.gap_high)
        return x.reshape(-1, 1), y

    def plot_inputs(self) -> torch.Tensor:
        """The figure's x-grid ``[plot_points, 1]``."""
        return torch.linspace(self.plot_low, self.plot_high, self.plot_points,
                              dtype=torch.float64).unsqueeze(1)
