"""VI (MFVI, alpha-divergence), deep-ensemble and plug-in adapters: end to end on tiny data."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bench.datasets.regression_splits import RegressionSplits
from bench.datasets.toy import heteroscedastic_toy
from bench.harness.errors import ConfigError
from bench.methods.baselines.deep_ensemble import DeepEnsembleMethod
from bench.methods.baselines.plugin import PluginMethod
from bench.methods.baselines.vi import AlphaVIMethod, MFVIMethod
from bench.metrics.regression import coverage


@pytest.fixture(scope="module")
def tiny_toy() -> RegressionSplits:
    """Lightning-UQ-Box's heteroscedastic toy with 60 points (datamodule attached)."""
    return heteroscedastic_toy(0, n_points=60)


def _assert_gaussian(predictive, n: int) -> None:
    assert predictive.mean.shape == (n,) and predictive.variance.shape == (n,)
    assert torch.isfinite(predictive.mean).all()
    assert (predictive.variance > 0).all() and torch.isfinite(predictive.variance).all()


@pytest.mark.parametrize("method_cls", [MFVIMethod, AlphaVIMethod])
@pytest.mark.parametrize("with_datamodule", [True, False])
@pytest.mark.second_tier
def test_vi_runs_and_same_seed_gives_same_predictions(tiny_toy, method_cls, with_datamodule):
    splits = tiny_toy if with_datamodule else dataclasses.replace(tiny_toy, datamodule=None)
    method = method_cls(max_epochs=3, batch_size=16, burnin_epochs=1) \
        if method_cls is MFVIMethod else method_cls(max_epochs=3)
    diagnostics = method.fit(splits, seed=3)
    first = method.predict(splits.x_test)
    _assert_gaussian(first, len(splits.x_test))
    assert diagnostics["epochs"] == 3
    assert method.predict(splits.x_test).mean.equal(first.mean)
    method.fit(splits, seed=3)
    again = method.predict(splits.x_test)
    assert again.mean.equal(first.mean) and again.variance.equal(first.variance)
    if with_datamodule:
        assert splits.datamodule.batch_size == 100


def test_deep_ensemble_runs_and_same_seed_gives_same_predictions(tiny_toy):
    method = DeepEnsembleMethod(members=3, max_epochs=20, patience=5)
    diagnostics = method.fit(tiny_toy, seed=1)
    first = method.predict(tiny_toy.x_test)
    _assert_gaussian(first, len(tiny_toy.x_test))
    assert len(diagnostics["epochs"]) == 3
    state = torch.get_rng_state()
    method.fit(tiny_toy, seed=1)
    assert torch.get_rng_state().equal(state)
    again = method.predict(tiny_toy.x_test)
    assert again.mean.equal(first.mean) and again.variance.equal(first.variance)
    method.fit(tiny_toy, seed=2)
    assert not method.predict(tiny_toy.x_test).mean.equal(first.mean)


def test_deep_ensemble_variance_is_mixture_moments(tiny_toy):
    method = DeepEnsembleMethod(members=4, max_epochs=10, patience=5)
    method.fit(tiny_toy, seed=0)
    x = tiny_toy.x_test
    means, variances = [], []
    for theta in method.thetas:
        out = method.shape.forward(theta, x)
        means.append(out[:, 0].double())
        variances.append(out[:, 1].double().exp())
    means, variances = torch.stack(means), torch.stack(variances)
    expected_mean = means.mean(0)
    expected_variance = variances.mean(0) + ((means - expected_mean) ** 2).mean(0)
    predictive = method.predict(x)
    torch.testing.assert_close(predictive.mean.double(), expected_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(predictive.variance.double(), expected_variance,
                               rtol=1e-5, atol=1e-6)


def test_plugin_noise_is_mean_squared_training_residual(tiny_toy):
    torch.manual_seed(0)
    network = torch.nn.Linear(1, 1)
    method = PluginMethod.from_network(network)
    diagnostics = method.fit(tiny_toy, seed=0)
    with torch.no_grad():
        residual = network(tiny_toy.x_train) - tiny_toy.y_train
    assert diagnostics["noise_variance"] == pytest.approx(float((residual**2).mean()), rel=1e-6)
    predictive = method.predict(tiny_toy.x_test)
    _assert_gaussian(predictive, len(tiny_toy.x_test))
    with torch.no_grad():
        assert predictive.mean.equal(network(tiny_toy.x_test)[:, 0])
    assert predictive.variance.eq(diagnostics["noise_variance"]).all()


def test_plugin_keeps_a_given_noise_variance(tiny_toy):
    method = PluginMethod(noise_variance=0.25)
    method.network = torch.nn.Linear(1, 1)
    assert method.fit(tiny_toy, seed=0)["noise_variance"] == 0.25
    assert method.predict(tiny_toy.x_test).variance.eq(0.25).all()


@pytest.mark.parametrize("method_cls", [MFVIMethod, AlphaVIMethod, DeepEnsembleMethod])
def test_bad_activation_names_the_config_key(method_cls):
    with pytest.raises(ConfigError, match="method.activation"):
        method_cls(activation="swish")


@pytest.mark.slow
def test_mfvi_reproduces_paper_table_2_coverage():
    """The authors' MFVI on their split with seed 42: Table 2's 100/100/96/80 exactly."""
    splits = heteroscedastic_toy(42)
    method = MFVIMethod()
    method.fit(splits, seed=42)
    predictive = method.predict(splits.x_test)
    got = [coverage(predictive, splits.y_test, level, z="paper") for level in (95, 90, 75, 50)]
    assert got == [100.0, 100.0, 96.0, 80.0]
