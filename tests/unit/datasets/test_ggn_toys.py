"""The GGN thesis toys against the checksums of the reproduction notes (sections 2.1-2.2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.datasets.snelson import (
    SNELSON_X_MAX,
    SNELSON_X_MIN,
    SnelsonGapData,
    snelson_mean_function,
)
from bench.datasets.two_moons import TwoMoonsData
from bench.harness.errors import ConfigError
from tests.helpers import SHARED_DATA


def test_snelson_train_set_matches_the_notes_checksums():
    toy = SnelsonGapData().splits()
    x, y = toy.x_train[:, 0].numpy(), toy.y_train.numpy()
    assert toy.x_train.shape == (150, 1) and toy.x_train.dtype == torch.float64
    assert (x.min(), x.max()) == pytest.approx((0.12772, 5.93156), abs=5e-6)
    assert y.mean() == pytest.approx(-0.16523, abs=5e-6)
    assert y.std() == pytest.approx(0.75728, abs=5e-6)
    first = np.stack([x[:3], y[:3]], axis=1)
    np.testing.assert_allclose(first, [[5.33294, -0.46074], [4.90984, -0.29981],
                                       [0.30545, -0.41404]], atol=5e-6)
    assert not ((x > 1.5) & (x < 2.4)).any()


def test_snelson_test_set_matches_the_notes_checksums():
    toy = SnelsonGapData().splits()
    assert toy.x_test.shape == (1000, 1)
    assert (float(toy.x_test[0, 0]), float(toy.y_test[0])) == pytest.approx((1.37039, -2.12480),
                                                                           abs=5e-6)
    assert float(toy.y_test.mean()) == pytest.approx(-0.23778, abs=5e-6)
    assert not ((toy.x_test > 1.5) & (toy.x_test < 2.4)).any()


def test_snelson_mean_is_a_not_a_knot_spline_over_the_original_input_range():
    spline = snelson_mean_function()
    assert spline.x[0] == SNELSON_X_MIN and spline.x[-1] == SNELSON_X_MAX
    # not-a-knot: the third derivative is continuous at the second and second-to-last nodes
    third = spline.c[0]
    assert third[0] == pytest.approx(third[1]) and third[-1] == pytest.approx(third[-2])
    original = SHARED_DATA / "snelson" / "train_inputs"
    if original.is_file():
        inputs = np.loadtxt(original)
        assert (inputs.min(), inputs.max()) == pytest.approx((SNELSON_X_MIN, SNELSON_X_MAX))


def test_two_moons_match_the_notes_checksums():
    toy = TwoMoonsData().splits()
    assert toy.x_train.shape == (150, 2) and toy.y_train.dtype == torch.float64
    np.testing.assert_allclose(toy.x_train[0].numpy(), [1.24790, -0.05287], atol=5e-6)
    assert int(toy.y_train.sum()) == 75
    np.testing.assert_allclose(toy.x_train.mean(0).numpy(), [0.51155, 0.26749], atol=5e-6)
    np.testing.assert_allclose(toy.x_test[0].numpy(), [0.77042, 0.40071], atol=5e-6)
    assert toy.x_test.shape == (1000, 2) and int(toy.y_test.sum()) == 500
    assert set(toy.y_train.unique().tolist()) == {0.0, 1.0}


def test_two_moons_plot_grid_runs_first_coordinate_fastest():
    data = TwoMoonsData(plot_points=3)
    grid = data.plot_inputs()
    first, second = data.plot_axes()
    assert grid.shape == (9, 2)
    assert torch.equal(grid[:3, 0], first) and torch.equal(grid[::3, 1], second)


@pytest.mark.parametrize("bad", [{"n_train": 0}, {"noise_variance": -1.0},
                                 {"gap_low": 3.0, "gap_high": 2.0}])
def test_snelson_bad_settings_name_the_key(bad):
    with pytest.raises(ConfigError, match="dataset."):
        SnelsonGapData(**bad)


def test_two_moons_bad_settings_name_the_key():
    with pytest.raises(ConfigError, match="dataset.noise"):
        TwoMoonsData(noise=0.0)
