"""CyclicalSGHMC: the update rule and the noise scale by hand, the cyclical step size, the
samples kept, exact resume inside a sampling phase, reuse and one-line config errors."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.state_store import Checkpoints
from bench.methods.baselines.cyclical_sghmc import (
    CyclicalSGHMC,
    CyclicalSGHMCSampler,
    code_step_size,
    cyclical_step_size,
    sghmc_update,
)
from bench.models.classifiers import build_classifier


def tiny_data(results_dir, n: int = 20) -> TrainingSet:
    """``n`` random 1x28x28 images with random labels of 10 classes."""
    generator = torch.Generator().manual_seed(0)
    return TrainingSet(torch.rand(n, 1, 28, 28, generator=generator),
                       torch.randint(0, 10, (n,), generator=generator), name="random",
                       results_dir=str(results_dir))


def tiny_method(**overrides) -> CyclicalSGHMC:
    """CSGHMC on the MLP: 2 cycles of 3 epochs (3 minibatches each), the last 2 sampled."""
    settings = {"model": {"name": "mlp"}, "cycles": 2, "epochs_per_cycle": 3,
                "sampling_epochs": 2, "batch_size": 8, "prediction": {"batch_size": 7}}
    return CyclicalSGHMC(**{**settings, **overrides})


def test_update_rule_by_hand_on_two_parameters():
    theta = torch.tensor([1.0, -2.0], dtype=torch.float64)
    momentum = torch.tensor([0.5, 0.1], dtype=torch.float64)
    grad = torch.tensor([0.3, -0.4], dtype=torch.float64)
    sghmc_update(theta, momentum, grad, lr=0.1, friction=0.9, weight_decay=5e-4)
    # b = 0.1 b - 0.1 (g + 5e-4 theta): 0.05 - 0.03005, 0.01 + 0.0401
    assert momentum.tolist() == pytest.approx([0.01995, 0.0501], abs=1e-15)
    assert theta.tolist() == pytest.approx([1.01995, -1.9499], abs=1e-15)
    noise = torch.tensor([1.0, -2.0], dtype=torch.float64)
    sghmc_update(theta, momentum, torch.zeros(2, dtype=torch.float64), lr=0.1, friction=0.9,
                 weight_decay=0.0, noise=noise, n_data=10)
    scale = math.sqrt(2 * 0.1 * 0.9) / 10
    assert momentum.tolist() == pytest.approx([0.001995 + scale, 0.00501 - 2 * scale],
                                              abs=1e-15)


def test_sampler_steps_a_two_parameter_model_with_the_cyclical_step_size():
    w = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    x = torch.tensor([2.0, 1.0], dtype=torch.float64)
    sampler = CyclicalSGHMCSampler([w], lr=0.1, friction=0.9, weight_decay=0.0, n_data=4,
                                   steps_per_epoch=2, epochs_per_cycle=2, sampling_epochs=1,
                                   generator=torch.Generator().manual_seed(0))
    theta, b = [0.5, -1.0], [0.0, 0.0]
    for step in range(2):  # epoch 0 of the cycle: no noise
        sampler.zero_grad()
        (0.5 * (x @ w) ** 2).backward()  # grad = (x . w) x
        sampler.step()
        lr = 0.1 * (1 + math.cos(math.pi * step / 4)) / 2
        inner = 2.0 * theta[0] + 1.0 * theta[1]
        b = [0.1 * b[i] - lr * inner * x[i].item() for i in range(2)]
        theta = [theta[i] + b[i] for i in range(2)]
    assert w.detach().tolist() == pytest.approx(theta, abs=1e-15)
    assert sampler.param_groups[0]["step"] == 2
    assert sampler.param_groups[0]["lr"] == pytest.approx(0.1 * (1 + math.cos(math.pi / 4)) / 2)


def test_noise_is_sqrt_2_lr_friction_over_n_squared_only_in_sampling_epochs():
    theta = torch.zeros(1000, requires_grad=True)
    sampler = CyclicalSGHMCSampler([theta], lr=0.1, friction=0.9, weight_decay=0.0,
                                   n_data=50, steps_per_epoch=1, epochs_per_cycle=4,
                                   sampling_epochs=2, generator=torch.Generator().manual_seed(3))
    theta.grad = torch.zeros(1000)
    sampler.step()  # epoch 0: no noise
    sampler.step()  # epoch 1: no noise
    assert torch.equal(theta.detach(), torch.zeros(1000))
    sampler.step()  # epoch 2 of 4: sampling, lr = 0.1 (1 + cos(pi/2)) / 2 = 0.05
    eps = torch.randn(1000, generator=torch.Generator().manual_seed(3))
    assert torch.allclose(theta.detach(), math.sqrt(2 * 0.05 * 0.9) / 50 * eps, atol=1e-9)


def test_step_size_is_a_cosine_from_lr_restarting_each_cycle():
    assert cyclical_step_size(0, 10, 0.1) == 0.1
    assert cyclical_step_size(5, 10, 0.1) == pytest.approx(0.05)
    assert cyclical_step_size(9, 10, 0.1) == pytest.approx(0.05 * (1 + math.cos(0.9 * math.pi)))
    assert cyclical_step_size(10, 10, 0.1) == 0.1


def code_lr(step: int) -> float:
    """The authors' step size on MNIST (60,000 images, their loader's 118 batches of 512,
    4 cycles of 50 epochs, lr 0.1)."""
    return code_step_size(step, steps_per_epoch=118, n_data=60000, epochs=200, cycles=4,
                          lr=0.1)


def test_the_codes_counter_covers_a_quarter_epoch_per_epoch_then_jumps():
    # The counter assumes 60000 / 128 + 1 = 469.75 batches per epoch and a cycle of
    # 200 * 469.75 // 4 = 23487 counts: epoch e, batch b sits at (469.75 e + b) / 23487 of it.
    def at(epochs: float) -> float:
        return 0.05 * (1 + math.cos(math.pi * 469.75 * epochs / 23487))

    assert code_lr(0) == 0.1
    assert code_lr(117) == pytest.approx(at(117 / 469.75))  # a quarter epoch into the cycle
    assert code_lr(118) == pytest.approx(at(1.0))  # the next epoch: a jump
    last = 49 * 118 + 117  # the cycle's last step: 49.25 nominal epochs in
    assert code_lr(last) == pytest.approx(at(49 + 117 / 469.75))
    assert code_lr(last) > 3 * cyclical_step_size(last, 50 * 118, 0.1)
    assert code_lr(50 * 118) == pytest.approx(0.05 * (1 + math.cos(math.pi * 0.5 / 23487)))


def test_the_codes_counter_drives_the_sampler_when_asked(tmp_path):
    smooth, code = tiny_method(), tiny_method(step_counter="code")
    assert "step_counter" not in smooth.recipe(tiny_data(tmp_path))
    assert code.recipe(tiny_data(tmp_path))["step_counter"] == "code"
    step_size = code._step_size(n_data=20, steps_per_epoch=3)
    assert [step_size(step) for step in (0, 3, 9)] == [
        code_step_size(step, steps_per_epoch=3, n_data=20, epochs=6, cycles=2, lr=0.1)
        for step in (0, 3, 9)]
    assert smooth._step_size(20, 3) is None
    code.fit(tiny_data(tmp_path), seed=1)
    smooth.fit(tiny_data(tmp_path), seed=1)
    assert not torch.equal(code.stored_tensors()["1.weight"], smooth.stored_tensors()["1.weight"])


def test_keeps_the_last_epochs_of_each_cycle_and_predicts_their_softmax_mean(tmp_path):
    method = tiny_method()
    diagnostics = method.fit(tiny_data(tmp_path), seed=0)
    assert diagnostics["samples"] == 4 and diagnostics["epochs"] == 6
    stored = method.stored_tensors()
    assert {tuple(v.shape[:1]) for v in stored.values()} == {(4,)}
    assert not torch.equal(stored["1.weight"][2], stored["1.weight"][3])
    x = torch.rand(9, 1, 28, 28)
    network = build_classifier("mlp", torch.Generator().manual_seed(1)).eval()
    expected = torch.zeros(9, 10)
    for s in range(4):
        network.load_state_dict({name: value[s] for name, value in stored.items()})
        with torch.no_grad():
            expected += torch.softmax(network(x), -1) / 4
    assert torch.allclose(method.predict(x).probs, expected, atol=1e-6)


def test_killed_in_a_sampling_phase_resumes_exactly_with_its_samples(tmp_path, monkeypatch):
    straight = tiny_method()
    straight.fit(tiny_data(tmp_path / "straight"), seed=0)
    save, calls = Checkpoints.save, []

    def die_after_epoch_two(self, values):
        save(self, values)
        calls.append(len(values["samples"]))
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(Checkpoints, "save", die_after_epoch_two)
    with pytest.raises(KeyboardInterrupt):
        tiny_method().fit(tiny_data(tmp_path / "killed"), seed=0)
    assert calls == [0, 1]
    monkeypatch.setattr(Checkpoints, "save", save)
    resumed = tiny_method()
    assert resumed.fit(tiny_data(tmp_path / "killed"), seed=0)["samples"] == 4
    for name, value in straight.stored_tensors().items():
        assert torch.equal(value, resumed.stored_tensors()[name]), name


def test_seeded_reused_and_the_global_rng_untouched(tmp_path):
    before = torch.get_rng_state()
    first = tiny_method()
    first.fit(tiny_data(tmp_path / "a"), seed=4)
    assert torch.equal(torch.get_rng_state(), before)
    again = tiny_method()
    assert again.fit(tiny_data(tmp_path / "a"), seed=4)["state_reused"] is True
    fresh = tiny_method()
    fresh.fit(tiny_data(tmp_path / "b"), seed=4)
    other = tiny_method()
    other.fit(tiny_data(tmp_path / "b"), seed=5)
    for name, value in first.stored_tensors().items():
        assert torch.equal(value, fresh.stored_tensors()[name]), name
        assert torch.equal(value, again.stored_tensors()[name]), name
    assert not torch.equal(first.stored_tensors()["1.weight"], other.stored_tensors()["1.weight"])


def test_batch_norm_samples_carry_their_running_statistics(tmp_path):
    method = tiny_method(model={"name": "resnet18", "options": {"width": 4}}, cycles=1,
                         epochs_per_cycle=2, sampling_epochs=2)
    data = TrainingSet(torch.rand(12, 3, 32, 32), torch.randint(0, 10, (12,)),
                       results_dir=str(tmp_path))
    method.fit(data, seed=0)
    means = method.stored_tensors()["bn1.running_mean"]
    assert means.shape == (2, 4) and not torch.equal(means[0], means[1])
    assert isinstance(method.network, nn.Module)
    assert method.predict(torch.rand(3, 3, 32, 32)).probs.shape == (3, 10)


@pytest.mark.parametrize(("key", "value"), [
    ("cycles", 0), ("sampling_epochs", 4), ("lr", -0.1), ("friction", 1.5),
    ("weight_decay", -1.0), ("model", {"name": "vgg"}), ("step_counter", "epochs")])
def test_a_bad_value_names_its_method_key(key, value):
    with pytest.raises(ConfigError, match=f"method.{key}"):
        tiny_method(**{key: value})
