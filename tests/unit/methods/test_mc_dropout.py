"""MC dropout (the method added to show the leaderboard): its predictive is the moment-matched
mixture of its masked passes, the same at every call, and it learns a regression function."""

from __future__ import annotations

import pytest
import torch

from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.baselines.mc_dropout import MCDropout, moment_matched
from bench.models.mlp import MLPShape


def _splits(n: int = 200, seed: int = 0) -> RegressionSplits:
    g = make_generator(seed)
    x = torch.rand(3 * n, 1, generator=g) * 4 - 2
    y = torch.sin(2 * x) + 0.1 * torch.randn(3 * n, 1, generator=g)
    return RegressionSplits(x[:n], y[:n], x[n:2 * n], y[n:2 * n], x[2 * n:], y[2 * n:])


def test_the_moment_matched_mixture_of_two_gaussians():
    mixture = moment_matched(torch.tensor([[0.0], [2.0]]), torch.tensor([[1.0], [1.0]]))
    assert mixture.mean.item() == pytest.approx(1.0)
    assert mixture.variance.item() == pytest.approx(2.0)


def test_without_dropout_one_pass_is_the_network_itself():
    method = MCDropout(dropout=0.0, n_samples=1, max_epochs=2)
    data = _splits(50)
    method.fit(data, seed=3)
    output = method.shape.forward(method.theta, data.x_test)
    predictive = method.predict(data.x_test)
    assert torch.equal(predictive.mean, output[:, 0])
    assert torch.allclose(predictive.variance, output[:, 1].exp())


def test_masks_drop_the_stated_share_and_scale_the_kept_units():
    method = MCDropout(dropout=0.25)
    method.shape = MLPShape((1, 4000, 2), "relu")
    theta = torch.zeros(method.shape.n_params)
    (_, hidden_bias), (output_weight, _) = method.shape.unflatten(theta)
    hidden_bias.fill_(1.0)
    output_weight[0].fill_(1.0)
    # Every hidden unit is 1; the output sums the kept ones, each scaled by 1 / (1 - p).
    output = method.masked_forward(theta, torch.zeros(1, 1), make_generator(0))
    kept_share = output[0, 0].item() * (1 - 0.25) / 4000
    assert kept_share == pytest.approx(0.75, abs=0.03)


def test_the_prediction_is_the_same_at_every_call_and_moves_with_the_seed():
    data = _splits(100)
    first, second = MCDropout(max_epochs=5), MCDropout(max_epochs=5)
    first.fit(data, seed=0)
    second.fit(data, seed=1)
    assert torch.equal(first.predict(data.x_test).mean, first.predict(data.x_test).mean)
    assert not torch.equal(first.predict(data.x_test).mean, second.predict(data.x_test).mean)


@pytest.mark.second_tier
def test_it_learns_a_sine_with_noise_and_the_same_seed_fits_the_same_network():
    data = _splits(300)
    method, again = MCDropout(), MCDropout()
    diagnostics = method.fit(data, seed=0)
    again.fit(data, seed=0)
    predictive = method.predict(data.x_test)
    residual = ((predictive.mean - data.y_test[:, 0]) ** 2).mean()
    assert residual < 0.25 * data.y_test.var()
    assert diagnostics["best_epoch"] > 0
    assert torch.equal(method.theta, again.theta)


def test_an_empty_validation_part_is_one_line():
    data = _splits(50)
    empty = RegressionSplits(data.x_train, data.y_train, data.x_val[:0], data.y_val[:0],
                             data.x_test, data.y_test)
    with pytest.raises(ConfigError, match="validation part is empty"):
        MCDropout(max_epochs=2).fit(empty, seed=0)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("dropout", 1.0, r"method.dropout=1.0 is not valid"),
    ("weight_decay", -1.0, r"method.weight_decay=-1.0 is not valid"),
    ("n_samples", 0, r"method.n_samples"),
    ("activation", "swish", r"method.activation"),
])
def test_bad_settings_are_one_line(key, value, message):
    with pytest.raises(ConfigError, match=message):
        MCDropout(**{key: value})
