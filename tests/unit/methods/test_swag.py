"""SWAG: moments against a hand computation, the sample covariance against its closed form,
the predictive against the formula, exact resume, reuse, the BatchNorm refresh, config errors."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn.utils import vector_to_parameters

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.harness.state_store import Checkpoints
from bench.methods.baselines.swag import (
    SWAG,
    refresh_batch_norm,
    sample_parameters,
    update_moments,
)

N = 20


def tiny_data(tmp_path, n: int = N) -> TrainingSet:
    g = make_generator(0)
    return TrainingSet(torch.rand(n, 1, 4, 4, generator=g), torch.randint(0, 3, (n,), generator=g),
                       name="random", preprocessing="uniform", results_dir=str(tmp_path))


def tiny_network(batch_norm: bool = False) -> nn.Module:
    torch.manual_seed(0)
    layers = [nn.Flatten(), nn.Linear(16, 5)]
    layers += [nn.BatchNorm1d(5)] if batch_norm else []
    return nn.Sequential(*layers, nn.ReLU(), nn.Dropout(0.2), nn.Linear(5, 3))


def test_moments_match_a_hand_computation():
    snapshots = torch.tensor([[1.0, 2.0], [3.0, 0.0], [2.0, 4.0]], dtype=torch.float64)
    moments = None
    for theta in snapshots:
        moments = update_moments(moments, theta, rank=2)
    assert moments["count"] == 3
    assert torch.allclose(moments["mean"], torch.tensor([2.0, 2.0], dtype=torch.float64))
    assert torch.allclose(moments["second_moment"],
                          torch.tensor([14 / 3, 20 / 3], dtype=torch.float64))
    # rows theta_i - mean_i of the last two snapshots: mean_2 = (2, 1), mean_3 = (2, 2)
    assert torch.allclose(moments["deviations"],
                          torch.tensor([[1.0, -1.0], [0.0, 2.0]], dtype=torch.float64))


def test_sample_covariance_is_half_diagonal_plus_half_low_rank():
    mean = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    sigma2 = torch.tensor([0.3, 0.1, 0.05], dtype=torch.float64)
    deviations = torch.tensor([[0.2, -0.4, 0.1], [0.5, 0.3, -0.2], [-0.1, 0.2, 0.6]],
                              dtype=torch.float64)
    draws = sample_parameters(mean, sigma2 + mean ** 2, deviations, 0.5, make_generator(1),
                              n=200_000)
    expected = torch.diag(sigma2) / 2 + deviations.T @ deviations / (2 * (3 - 1))
    assert torch.allclose(draws.mean(0), mean, atol=5e-3)
    assert torch.allclose(torch.cov(draws.T), expected, atol=5e-3)


def test_predictive_is_the_mean_softmax_over_the_seeded_draws(tmp_path):
    data, base = tiny_data(tmp_path), tiny_network()
    method = SWAG(epochs=3, batch_size=8, rank=2, n_samples=4, prediction={"batch_size": 7})
    diagnostics = method.fit(data, seed=1, base=base)
    assert diagnostics["snapshots"] == 3 and diagnostics["rank_used"] == 2
    assert set(method.stored_tensors()) == {"mean", "second_moment", "deviations"}
    assert method.stored_tensors()["deviations"].shape == (2, 16 * 5 + 5 + 5 * 3 + 3)
    x = torch.rand(9, 1, 4, 4, generator=make_generator(3))
    generator, network, probs = make_generator(711), copy.deepcopy(base).eval(), []
    for _ in range(4):
        theta = sample_parameters(method.state["mean"], method.state["second_moment"],
                                  method.state["deviations"], 0.5, generator)[0]
        vector_to_parameters(theta, network.parameters())
        probs.append(torch.softmax(network(x), dim=-1))
    first, second = method.predict(x).probs, method.predict(x).probs
    assert torch.allclose(first, torch.stack(probs).mean(0).detach(), atol=1e-6)
    assert torch.equal(first, second)
    assert torch.equal(base[1].weight, tiny_network()[1].weight)  # the base is not trained


def test_second_fit_loads_the_stored_moments(tmp_path):
    data = tiny_data(tmp_path)
    first = SWAG(epochs=2, batch_size=8, rank=2, n_samples=2)
    second = SWAG(epochs=2, batch_size=8, rank=2, n_samples=2)
    assert not first.fit(data, seed=1, base=tiny_network())["state_reused"]
    assert second.fit(data, seed=1, base=tiny_network())["state_reused"]
    for key, tensor in first.stored_tensors().items():
        assert torch.equal(second.stored_tensors()[key], tensor)
    other = SWAG(epochs=2, batch_size=8, rank=2, n_samples=2, lr=0.02)
    assert not other.fit(data, seed=1, base=tiny_network())["state_reused"]


def test_an_interrupted_run_resumes_exactly(tmp_path, monkeypatch):
    straight = SWAG(epochs=3, batch_size=8, rank=2)
    straight.fit(tiny_data(tmp_path / "a"), seed=4, base=tiny_network())
    saves = []
    original = Checkpoints.save

    def save_then_die(self, values):
        original(self, values)
        saves.append(values)
        raise KeyboardInterrupt

    monkeypatch.setattr(Checkpoints, "save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        SWAG(epochs=3, batch_size=8, rank=2).fit(tiny_data(tmp_path / "b"), seed=4,
                                                   base=tiny_network())
    monkeypatch.setattr(Checkpoints, "save", lambda self, values: (saves.append(values),
                                                                  original(self, values)))
    resumed = SWAG(epochs=3, batch_size=8, rank=2)
    resumed.fit(tiny_data(tmp_path / "b"), seed=4, base=tiny_network())
    assert len(saves) == 3  # epoch 1 before the interruption, epochs 2 and 3 after it
    for key, tensor in straight.stored_tensors().items():
        assert torch.equal(resumed.stored_tensors()[key], tensor), key


def test_batch_norm_refresh_gives_the_training_inputs_statistics():
    network = tiny_network(batch_norm=True)
    inputs = torch.rand(N, 1, 4, 4, generator=make_generator(2))
    features = network[1](network[0](inputs)).detach()
    refresh_batch_norm(network, inputs, batch_size=N, device="cpu")
    norm = network[2]
    assert torch.allclose(norm.running_mean, features.mean(0), atol=1e-6)
    assert torch.allclose(norm.running_var, features.var(0), atol=1e-6)
    refresh_batch_norm(network, inputs, batch_size=8, device="cpu")  # batches 8, 8, 4
    assert torch.allclose(norm.running_mean, features.mean(0), atol=1e-6)
    assert not network.training and not norm.training


def test_every_sample_predicts_with_its_own_refreshed_statistics(tmp_path):
    data, base = tiny_data(tmp_path), tiny_network(batch_norm=True)
    method = SWAG(epochs=2, batch_size=8, rank=2, n_samples=3, bn_refresh=True)
    method.fit(data, seed=0, base=base)
    assert {k for k in method.stored_tensors() if k.startswith("buffer.")} == {
        "buffer.2.running_mean", "buffer.2.running_var", "buffer.2.num_batches_tracked"}
    x = torch.rand(5, 1, 4, 4, generator=make_generator(3))
    generator, network, probs, means = make_generator(711), copy.deepcopy(base), [], []
    for _ in range(3):
        theta = sample_parameters(method.state["mean"], method.state["second_moment"],
                                  method.state["deviations"], 0.5, generator)[0]
        vector_to_parameters(theta, network.parameters())
        refresh_batch_norm(network, data.train_inputs, 8, "cpu")
        means.append(network[2].running_mean.clone())
        probs.append(torch.softmax(network(x), dim=-1))
    assert not torch.allclose(means[0], means[1])
    assert torch.allclose(method.predict(x).probs, torch.stack(probs).mean(0).detach(),
                          atol=1e-6)
    assert torch.allclose(method.predict(x).probs, torch.stack(probs).mean(0).detach(),
                          atol=1e-6)
    assert len(method.refreshed) == 3


@pytest.mark.parametrize(("key", "value"), [("rank", 0), ("lr", -1.0), ("epochs", 1),
                                            ("momentum", 1.0), ("scale", 0), ("n_samples", 0),
                                            ("bn_refresh", "yes"), ("batch_size", 0)])
def test_bad_values_name_the_key(key, value):
    with pytest.raises(ConfigError, match=f"^method.{key}="):
        SWAG(**{key: value})


def test_fit_and_predict_leave_the_global_rng_alone(tmp_path):
    base, data, x = tiny_network(), tiny_data(tmp_path), torch.rand(3, 1, 4, 4)
    before = torch.get_rng_state()
    method = SWAG(epochs=2, batch_size=8, rank=2, n_samples=2)
    method.fit(data, seed=0, base=base)
    method.predict(x)
    assert torch.equal(torch.get_rng_state(), before)
