"""The SSLA paper's heteroscedastic toy data (Lightning-UQ-Box's noisy sine, notes §6).

:class:`HeteroscedasticToyData` (the ``hetero_toy`` config node) runs the library's own
datamodule, as the paper did, so seed 42 reproduces the authors' splits draw for draw. The
library seeds numpy's global RNG from ``noise_seed`` inside its constructor; that is its
behaviour, kept here because the splits depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import require_positive


@dataclass
class HeteroscedasticToyData:
    """The toy's settings; :meth:`splits` draws the splits of one seed."""

    name: str
    n_points: int = 250
    test_fraction: float = 0.1
    test_points: int = 0

    def splits(self, seed: int) -> RegressionSplits:
        """Standardised splits whose noise and split seed is ``seed`` (42: the paper's)."""
        return heteroscedastic_toy(seed, self.n_points, self.test_fraction, self.test_points)


def heteroscedastic_toy(
    seed: int, n_points: int = 250, test_fraction: float = 0.1, test_points: int = 0,
) -> RegressionSplits:
    """``ToyHeteroscedasticDatamodule(n_points, test_fraction)`` with noise/split seed ``seed``.

    Seed 42 is the paper's 200/15/10/25 split. ``test_points > 0`` replaces the 25-point test
    set by that many fresh draws from the same generator (same scalers), so coverage is not
    estimated from 25 points only.
    """
    from lightning_uq_box.datamodules import ToyHeteroscedasticDatamodule

    require_positive("dataset.n_points", n_points)
    dm = ToyHeteroscedasticDatamodule(
        n_points=n_points, test_fraction=test_fraction, noise_seed=seed, split_seed=seed,
    )
    splits = RegressionSplits(
        x_train=dm.X_train, y_train=dm.Y_train, x_val=dm.X_val, y_val=dm.Y_val,
        x_test=dm.X_test, y_test=dm.Y_test, datamodule=dm,
    )
    x_raw, y_raw = _heteroscedastic_draws(np.random.RandomState(seed), n_points)
    x_map, y_map = _affine_map(x_raw, dm.X_all), _affine_map(y_raw, dm.Y_all)
    splits.y_scale = y_map[1]
    splits.info = {"source": "lightning_uq_box.ToyHeteroscedasticDatamodule",
                   "n_points": n_points, "test_fraction": test_fraction, "seed": seed,
                   "x_train_mean_std": list(x_map), "y_train_mean_std": list(y_map)}
    if test_points:
        x, y = _heteroscedastic_draws(np.random.RandomState(seed + 1_000_003), test_points)
        splits.x_test = torch.as_tensor((x - x_map[0]) / x_map[1], dtype=torch.float32)
        splits.y_test = torch.as_tensor((y - y_map[0]) / y_map[1], dtype=torch.float32)
        splits.info["test_points"] = test_points
    return splits


def _heteroscedastic_draws(rs: np.random.RandomState, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The datamodule's generator, draw for draw: u, x from one of three clusters, noise."""
    x, y = np.empty(n), np.empty(n)
    for k in range(n):
        u = rs.rand()
        centre, scale = (-4.0, 0.4) if u < 1 / 3 else (0.0, 0.9) if u < 2 / 3 else (4.0, 0.4)
        x[k] = rs.normal(loc=centre, scale=scale)
        y[k] = 7 * np.sin(x[k]) + 3 * np.abs(np.cos(x[k] / 2)) * rs.randn()
    return x[:, None], y[:, None]


def _affine_map(raw: np.ndarray, scaled: torch.Tensor) -> tuple[float, float]:
    """(mean, std) of the library's train scaler, recovered from raw vs scaled values.

    Fails loudly if our regeneration of the raw draws does not match the library's.
    """
    scaled_np = scaled.double().numpy().ravel()
    std, mean = np.polyfit(scaled_np, raw.ravel(), 1)
    if np.max(np.abs(mean + std * scaled_np - raw.ravel())) > 1e-4 * max(1.0, abs(std)):
        raise RuntimeError("regenerated toy draws do not match the datamodule's; library changed?")
    return float(mean), float(std)
