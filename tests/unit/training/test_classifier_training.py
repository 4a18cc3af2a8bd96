"""Staged classifier training: objectives, weight decay modes, train/eval mode, exact resume."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.models.classifiers import he_fan_out_conv_init, initialised
from bench.training.classifier import (
    ClassifierCheckpoint,
    TrainingStage,
    l2_penalty,
    train_classifier,
)


def tiny_net(seed: int, dropout: float = 0.0) -> nn.Module:
    """A conv net with batch norm (and dropout) on 1x6x6 images, 3 classes."""
    return initialised(
        lambda: nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                              nn.Dropout(dropout), nn.Flatten(), nn.Linear(64, 3)),
        he_fan_out_conv_init, make_generator(seed))


def tiny_data(n: int = 24):
    g = make_generator(11)
    return torch.randn(n, 1, 6, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


STAGES = (TrainingStage(epochs=2, lr=0.01, batch_size=5, schedule="cosine", min_lr=1e-3),
          TrainingStage(epochs=2, lr=0.05, batch_size=7, optimizer="sgd", momentum=0.9,
                        nesterov=True, weight_decay=0.1, weight_decay_mode="objective"))


def state_of(net: nn.Module) -> dict:
    return {k: v.clone() for k, v in net.state_dict().items()}


def test_first_epoch_objective_is_the_initial_cross_entropy_plus_the_l2_term():
    images, labels = tiny_data()
    net = tiny_net(0)
    reference = tiny_net(0).train()
    with torch.no_grad():
        expected = F.cross_entropy(reference(images), labels) + 0.5 * 0.3 * l2_penalty(
            list(reference.parameters()))
    stage = TrainingStage(epochs=1, lr=0.1, batch_size=24, optimizer="sgd",
                          weight_decay=0.3, weight_decay_mode="objective")
    history = train_classifier(net, images, labels, [stage], generator=make_generator(0),
                               dropout_seed=0)
    assert [(h["stage"], h["epoch"], h["lr"]) for h in history] == [(0, 0, 0.1)]
    assert history[0]["objective"] == pytest.approx(float(expected), rel=1e-6)


def test_l2_in_the_objective_equals_sgd_weight_decay():
    images, labels = tiny_data()
    results = []
    for mode in ("objective", "optimizer"):
        net = tiny_net(1)
        stage = TrainingStage(epochs=2, lr=0.05, batch_size=6, optimizer="sgd",
                              weight_decay=0.2, weight_decay_mode=mode)
        train_classifier(net, images, labels, [stage], generator=make_generator(3),
                         dropout_seed=0)
        results.append(state_of(net))
    plain = tiny_net(1)
    train_classifier(plain, images, labels, [TrainingStage(2, 0.05, 6, optimizer="sgd")],
                     generator=make_generator(3), dropout_seed=0)
    for key, value in results[0].items():
        torch.testing.assert_close(value, results[1][key], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(results[0]["5.weight"], plain.state_dict()["5.weight"])


def test_trains_in_train_mode_and_ends_in_eval_mode():
    images, labels = tiny_data()
    net = tiny_net(2, dropout=0.5)
    modes = []
    net.register_forward_hook(lambda module, args, out: modes.append(module.training))
    train_classifier(net, images, labels, [TrainingStage(1, 0.01, 12)],
                     generator=make_generator(0), dropout_seed=0)
    assert modes == [True, True] and not net.training
    assert int(net[1].num_batches_tracked) == 2


def test_dropout_draws_from_a_forked_rng_and_same_seeds_repeat():
    images, labels = tiny_data()
    global_state = torch.get_rng_state()
    states = []
    for dropout_seed in (4, 4, 5):
        net = tiny_net(3, dropout=0.5)
        train_classifier(net, images, labels, STAGES, generator=make_generator(1),
                         dropout_seed=dropout_seed)
        states.append(state_of(net))
    assert torch.equal(torch.get_rng_state(), global_state)
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    assert not torch.equal(states[0]["5.weight"], states[2]["5.weight"])


@pytest.mark.parametrize("stop_after", [1, 2, 3])  # inside stage 1, at the boundary, in stage 2
def test_resume_after_an_interruption_equals_the_uninterrupted_run(stop_after):
    images, labels = tiny_data()
    straight = tiny_net(5, dropout=0.3)
    straight_history = train_classifier(straight, images, labels, STAGES,
                                        generator=make_generator(8), dropout_seed=9)
    saved = []

    def interrupt(checkpoint: ClassifierCheckpoint) -> None:
        saved.append(_deep_clone(checkpoint.to_dict()))
        if len(checkpoint.history) == stop_after:
            raise KeyboardInterrupt

    net = tiny_net(5, dropout=0.3)
    with pytest.raises(KeyboardInterrupt):
        train_classifier(net, images, labels, STAGES, generator=make_generator(8),
                         dropout_seed=9, on_epoch_end=interrupt)
    resumed = tiny_net(77, dropout=0.3)  # different init: everything must come from the file
    history = train_classifier(resumed, images, labels, STAGES, generator=make_generator(0),
                               dropout_seed=0,
                               resume=ClassifierCheckpoint.from_dict(saved[-1]))
    expected = state_of(straight)
    assert all(torch.equal(expected[k], v) for k, v in resumed.state_dict().items())
    assert [h["objective"] for h in history] == [h["objective"] for h in straight_history]
    assert [h["lr"] for h in history] == [h["lr"] for h in straight_history]


def _deep_clone(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, dict):
        return {k: _deep_clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_clone(v) for v in value]
    return value


@pytest.mark.parametrize(("changes", "message"), [
    ({"epochs": 0}, "stage.epochs=0 is not valid"),
    ({"batch_size": 2.5}, "stage.batch_size=2.5 is not valid"),
    ({"lr": -1.0}, "stage.lr=-1.0 is not valid"),
    ({"optimizer": "rmsprop"}, "stage.optimizer='rmsprop' is not valid; choose one of: adam"),
    ({"schedule": "step"}, "stage.schedule='step' is not valid; choose one of: none, cosine"),
    ({"weight_decay_mode": "l2"}, "stage.weight_decay_mode='l2' is not valid"),
    ({"weight_decay": -0.1}, "stage.weight_decay=-0.1 is not valid"),
    ({"momentum": 0.9}, "stage.momentum=0.9 is not valid with optimizer='adam'"),
    ({"optimizer": "sgd", "momentum": 1.0}, "stage.momentum=1.0 is not valid; it must be < 1"),
    ({"optimizer": "sgd", "nesterov": True}, "stage.nesterov=True is not valid with momentum"),
])
def test_bad_stage_values_are_one_line_config_errors_naming_the_key(changes, message):
    values = {"epochs": 1, "lr": 0.1, "batch_size": 4} | changes
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as caught:
        TrainingStage(**values).check()
    assert "\n" not in str(caught.value)
