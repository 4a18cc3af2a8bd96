"""The fast HMC sampler against pyro's HMC kernel (the oracle): same kept states bit for bit,
same acceptance, same global RNG state afterwards; the explicit MLP gradient against autograd."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from bench.datasets.toy import heteroscedastic_toy
from bench.harness.errors import ConfigError
from bench.methods.baselines.hmc import HMCMethod
from bench.methods.baselines.hmc_replay import GaussianMLPPotential, potential_and_grad, sample_hmc
from bench.models.mlp import MLPShape, init_parameters


@pytest.fixture(scope="module")
def toy():
    """Table 2's heteroscedastic toy data (seed 42)."""
    return heteroscedastic_toy(42)


def _both_samplers(splits, **settings):
    """Fit with pyro then fast from the same seed: per sampler (samples, diagnostics, RNG)."""
    out = {}
    for sampler in ("pyro", "fast"):
        method = HMCMethod(sampler=sampler, **settings)
        diagnostics = method.fit(splits, seed=3)
        out[sampler] = (method.samples, diagnostics, torch.get_rng_state())
    return out


def _assert_same(out) -> dict:
    (oracle, oracle_diag, oracle_rng), (fast, diag, rng) = out["pyro"], out["fast"]
    assert oracle.shape == fast.shape
    assert torch.equal(fast, oracle)
    assert torch.equal(rng, oracle_rng)
    for key in ("acceptance_rate", "r_hat", "ess", "num_kept"):
        # r_hat of a chain that never moves is NaN on both sides
        both_nan = math.isnan(diag[key]) and math.isnan(oracle_diag[key])
        assert diag[key] == oracle_diag[key] or both_nan, key
    return diag


@pytest.mark.second_tier
def test_fast_sampler_replays_pyro_on_table_2_settings(toy):
    diag = _assert_same(_both_samplers(toy, num_samples=30, burn=10))
    assert diag["num_kept"] == 20 and diag["acceptance_rate"] == 1.0


@pytest.mark.parametrize("step_size, rate_range", [(0.03, (0.2, 0.9)), (5.0, (0.0, 0.0))])
@pytest.mark.second_tier
def test_fast_sampler_replays_pyro_with_rejections(toy, step_size, rate_range):
    """A large step rejects some proposals; a huge one diverges (NaN or inf energy) and
    rejects them all."""
    diag = _assert_same(_both_samplers(toy, num_samples=30, burn=10, step_size=step_size))
    low, high = rate_range
    assert low <= diag["acceptance_rate"] <= high


@pytest.mark.parametrize("activation, hidden", [("relu", (50, 50)), ("sigmoid", (7,)),
                                                ("tanh", ())])
def test_fast_sampler_replays_pyro_on_other_networks(toy, activation, hidden):
    _assert_same(_both_samplers(toy, num_samples=12, burn=4, step_size=0.01,
                                activation=activation, n_hidden=hidden))


@pytest.mark.parametrize("activation, hidden", [("tanh", (50, 50)), ("relu", (20, 30)),
                                                ("sigmoid", (5,)), ("tanh", ())])
def test_explicit_gradient_equals_autograd_bit_for_bit(activation, hidden):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 2, generator=g)
    y = torch.randn(64, generator=g)
    shape = MLPShape((2, *hidden, 1), activation)
    target = GaussianMLPPotential(shape, x, y, tau_in=0.7, tau_out=1.8914431914681566)
    for _ in range(3):
        theta = 2 * init_parameters(shape, g)
        grad, energy = target(theta)
        ref_grad, ref_energy = potential_and_grad(target.energy, theta.clone())
        assert torch.equal(energy, ref_energy) and torch.equal(grad, ref_grad)
        assert not theta.requires_grad


def test_generic_autograd_gradient_gives_the_same_chain(toy):
    x, y = toy.x_train, toy.y_train.reshape(-1)
    shape = MLPShape((1, 10, 1), "tanh")
    target = GaussianMLPPotential(shape, x, y, tau_in=1.0, tau_out=2.0)
    theta0 = init_parameters(shape, torch.Generator().manual_seed(1))
    settings = dict(step_size=0.06, num_steps=5, inverse_mass=0.5, num_samples=20, burn=5)
    runs = []
    for gradient in (target, functools.partial(potential_and_grad, target.energy)):
        torch.manual_seed(7)
        runs.append(sample_hmc(gradient, theta0, **settings))
    assert torch.equal(runs[0].samples, runs[1].samples)
    assert runs[0].accepted == runs[1].accepted and 0 < runs[0].accepted < 15


def test_unknown_sampler_is_a_config_error():
    with pytest.raises(ConfigError, match="method.sampler"):
        HMCMethod(sampler="numpyro")
