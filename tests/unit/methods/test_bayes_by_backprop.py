"""BayesByBackprop: bayesian-torch's KL weighted by kl_weight / N, the prior as a true variance,
exact resume, seed reproducibility, stored-state reuse and one-line config errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from bayesian_torch.layers import LinearFlipout
from bayesian_torch.models.dnn_to_bnn import get_kl_loss
from torch import nn

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.state_store import Checkpoints
from bench.methods.baselines.bayes_by_backprop import (
    BayesByBackprop,
    elbo_loss,
    kl_divergence,
    to_flipout,
)


def tiny_data(results_dir, n: int = 20) -> TrainingSet:
    """``n`` random 1x28x28 images with random labels of 10 classes."""
    generator = torch.Generator().manual_seed(0)
    return TrainingSet(torch.rand(n, 1, 28, 28, generator=generator),
                       torch.randint(0, 10, (n,), generator=generator), name="random",
                       results_dir=str(results_dir))


def tiny_method(**overrides) -> BayesByBackprop:
    """BBB on the 784-100-100-10 MLP, 2 epochs of 3 minibatches."""
    settings = {"model": {"name": "mlp"}, "epochs": 2, "batch_size": 8, "n_samples": 3,
                "prediction": {"batch_size": 7}}
    return BayesByBackprop(**{**settings, **overrides})


def test_objective_is_mean_cross_entropy_plus_kl_weight_times_bayesian_torch_kl_over_n():
    network = to_flipout(nn.Sequential(nn.Flatten(), nn.Linear(12, 5), nn.ReLU(),
                                       nn.Linear(5, 3)), 1.0, 0.0, -3.0)
    x, y = torch.randn(4, 3, 4), torch.tensor([0, 2, 1, 2])
    torch.manual_seed(3)
    loss = elbo_loss(network, x, y, n_data=50, kl_weight=0.1)
    torch.manual_seed(3)
    expected = F.cross_entropy(network(x), y) + 0.1 * get_kl_loss(network) / 50
    assert torch.allclose(loss, expected, rtol=1e-6)
    assert float(get_kl_loss(network).detach()) > 0


def test_prior_variance_is_a_variance_and_the_kl_averages_or_sums_each_tensor():
    layer = to_flipout(nn.Sequential(nn.Linear(3, 2)), 4.0, 0.0, -3.0)[0]
    assert isinstance(layer, LinearFlipout)
    with torch.no_grad():
        layer.mu_weight.copy_(torch.tensor([[0.0, 1.0, -2.0], [0.5, 0.0, 0.0]]))
        layer.rho_weight.fill_(math.log(math.e - 1))  # softplus(rho) = 1
        layer.mu_bias.zero_()
        layer.rho_bias.fill_(math.log(math.e - 1))
    # KL(N(mu, 1) || N(0, 2^2)) = log 2 + (1 + mu^2) / 8 - 1/2, averaged per tensor.
    constant = math.log(2) + 1 / 8 - 0.5
    weight_kl = constant + (0 + 1 + 4 + 0.25 + 0 + 0) / 6 / 8
    assert float(kl_divergence(layer).detach()) == pytest.approx(weight_kl + constant, rel=1e-6)
    summed = 6 * constant + (0 + 1 + 4 + 0.25) / 8 + 2 * constant
    assert float(kl_divergence(layer, "sum").detach()) == pytest.approx(summed, rel=1e-6)


def test_predict_is_the_mean_of_sampled_softmaxes_from_the_sample_seed(tmp_path):
    method = tiny_method(epochs=1)
    method.fit(tiny_data(tmp_path), seed=0)
    x = torch.rand(9, 1, 28, 28)
    first = method.predict(x).probs
    torch.manual_seed(5)
    torch.rand(3)
    assert torch.equal(method.predict(x).probs, first)
    torch.manual_seed(711)
    with torch.no_grad():
        manual = torch.cat([torch.stack([torch.softmax(method.network(chunk), -1)
                                         for _ in range(3)]).mean(0)
                            for chunk in x.split(7)])
    assert torch.allclose(first, manual, atol=1e-6)
    assert torch.allclose(first.sum(1), torch.ones(9))


def test_same_seed_same_posterior_other_seed_another_and_global_rng_untouched(tmp_path):
    before = torch.get_rng_state()
    a = tiny_method()
    a.fit(tiny_data(tmp_path / "a"), seed=1)
    assert torch.equal(torch.get_rng_state(), before)
    b = tiny_method()
    b.fit(tiny_data(tmp_path / "b"), seed=1)
    c = tiny_method()
    c.fit(tiny_data(tmp_path / "c"), seed=2)
    for name, value in a.stored_tensors().items():
        assert torch.equal(value, b.stored_tensors()[name]), name
    assert not torch.equal(a.stored_tensors()["1.mu_weight"], c.stored_tensors()["1.mu_weight"])


def test_a_killed_run_resumes_at_its_last_epoch_exactly(tmp_path, monkeypatch):
    straight = tiny_method()
    straight.fit(tiny_data(tmp_path / "straight"), seed=0)

    save = Checkpoints.save

    def save_then_die(self, values):
        save(self, values)
        raise KeyboardInterrupt

    monkeypatch.setattr(Checkpoints, "save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        tiny_method().fit(tiny_data(tmp_path / "killed"), seed=0)
    monkeypatch.setattr(Checkpoints, "save", save)
    resumed = tiny_method()
    diagnostics = resumed.fit(tiny_data(tmp_path / "killed"), seed=0)
    assert diagnostics["epochs"] == 2 and not diagnostics["state_reused"]
    for name, value in straight.stored_tensors().items():
        assert torch.equal(value, resumed.stored_tensors()[name]), name


def test_a_second_fit_of_the_same_recipe_loads_the_stored_posterior(tmp_path):
    data = tiny_data(tmp_path)
    first = tiny_method()
    assert first.fit(data, seed=0)["state_reused"] is False
    again = tiny_method()
    diagnostics = again.fit(data, seed=0)
    assert diagnostics["state_reused"] is True
    x = torch.rand(4, 1, 28, 28)
    assert torch.equal(again.predict(x).probs, first.predict(x).probs)
    other = tiny_method(kl_weight=1.0)
    assert other.fit(data, seed=0)["state_hash"] != diagnostics["state_hash"]


def test_stored_tensors_are_means_and_rhos_twice_the_network_size():
    method = BayesByBackprop()
    method.network = method.build(seed=0, in_channels=1)
    stored = method.stored_tensors()
    assert sum(t.numel() for t in stored.values()) == 2 * 44_426
    assert {name.rsplit(".", 1)[1].split("_")[0] for name in stored} == {"mu", "rho"}


@pytest.mark.parametrize(("key", "value"), [
    ("kl_weight", -0.1), ("prior_variance", 0.0), ("epochs", 0), ("n_samples", 1.5),
    ("model", {"name": "vgg"}), ("lr", float("nan")), ("kl_reduction", "batchmean")])
def test_a_bad_value_names_its_method_key(key, value):
    with pytest.raises(ConfigError, match=f"method.{key}"):
        BayesByBackprop(**{key: value})
    with pytest.raises(ConfigError, match="method.model.options.width"):
        BayesByBackprop(model={"name": "lenet_redux", "options": {"width": 3}})


def test_the_initial_posterior_and_the_training_noise_come_from_different_streams():
    from bench.harness.rng import seeded_global_rng
    from bench.methods.baselines.scratch_training import GLOBAL_STREAM, stream_seed

    method = tiny_method()
    first = next(m for m in method.build(seed=3, in_channels=1).modules()
                 if isinstance(m, LinearFlipout))
    with seeded_global_rng(stream_seed(3, GLOBAL_STREAM)):
        training_noise = torch.randn_like(first.mu_weight)
    # mu ~ N(0, 0.1): drawn from the training stream it would equal 0.1 x its first noise.
    assert not torch.allclose(first.mu_weight / 0.1, training_noise)
