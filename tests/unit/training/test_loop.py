"""The training loop: early stopping, schedules, minibatch order, full batch."""

from __future__ import annotations

import math

import pytest
import torch

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.training.loop import ALL_ROWS, LoopState, TrainingConfig, fit_parameters

ADAM_EPS = 1e-8


def linear_problem(n: int = 20, seed: int = 0):
    """Inputs ``[n, 2]``, targets of y = 2 x_1 - x_2 + noise, and a zero parameter vector."""
    g = make_generator(seed)
    x = torch.randn(n, 2, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([2.0, -1.0], dtype=torch.float64) + 0.1 * torch.randn(
        n, generator=g, dtype=torch.float64)
    return x, y, torch.zeros(2, dtype=torch.float64, requires_grad=True)


def squared_error(x, y, theta):
    """The mean squared error of ``x @ theta`` on a batch of rows."""
    return lambda rows: ((x[rows] @ theta - y[rows]) ** 2).mean()


def test_early_stopping_restores_the_best_epoch_and_stops_after_patience():
    theta = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    scores = iter([5.0, 3.0, 4.0, 2.0, 6.0, 7.0, 1.0, 0.5])
    seen = []

    def validation() -> float:
        seen.append(theta.detach().clone())
        return next(scores)

    config = TrainingConfig(lr=0.1, max_epochs=8, patience=2)
    history = fit_parameters([theta], lambda rows: theta.sum(), n_rows=1, config=config,
                             validation=validation)
    # best 2.0 at epoch 3; epochs 4 and 5 do not improve; 5 - 3 >= patience stops after 6.
    assert (history.epochs, history.best_epoch) == (6, 3)
    assert (history.best_validation, history.last_validation) == (2.0, 7.0)
    assert len(seen) == 6 and not torch.equal(seen[5], seen[3])
    assert torch.equal(theta.detach(), seen[3])
    # each Adam step on a constant unit gradient moves theta by lr / (1 + eps)
    assert float(seen[3]) == pytest.approx(-0.4 / (1 + ADAM_EPS), rel=1e-12)


def test_without_restore_the_last_parameters_stay_and_nonfinite_stops_at_once():
    theta = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    scores = iter([1.0, 2.0, math.nan, 0.0])
    config = TrainingConfig(lr=0.1, max_epochs=4, patience=10, restore_best=False)
    history = fit_parameters([theta], lambda rows: theta.sum(), n_rows=1, config=config,
                             validation=lambda: next(scores))
    assert (history.epochs, history.best_epoch, history.best_validation) == (3, 0, 1.0)
    assert math.isnan(history.last_validation)
    assert float(theta.detach()) == pytest.approx(-0.3 / (1 + ADAM_EPS), rel=1e-12)


@pytest.mark.parametrize(("schedule", "total_lr"), [
    ("none", 5.0),
    ("step", 1 + 1 + 0.1 + 0.1 + 0.01),  # StepLR: times 0.1 every 2 epochs
    ("cosine", 3.0),  # sum over t < T of (1 + cos(pi t / T)) / 2 = (T + 1) / 2
])
def test_learning_rate_schedule_is_applied_once_per_epoch(schedule, total_lr):
    theta = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    config = TrainingConfig(lr=1.0, max_epochs=5, schedule=schedule, step_every=2,
                            step_factor=0.1)
    fit_parameters([theta], lambda rows: theta.sum(), n_rows=1, config=config)
    assert float(theta.detach()) == pytest.approx(-total_lr / (1 + ADAM_EPS), rel=1e-12)


def test_adamw_applies_decoupled_weight_decay():
    theta = torch.ones(1, dtype=torch.float64, requires_grad=True)
    config = TrainingConfig(lr=0.1, max_epochs=1, optimizer="adamw", weight_decay=0.5)
    fit_parameters([theta], lambda rows: 0 * theta.sum(), n_rows=1, config=config)
    assert float(theta.detach()) == pytest.approx(1 - 0.1 * 0.5, rel=1e-12)


def test_minibatch_order_comes_from_the_generator():
    x, y, theta = linear_problem()
    seen, loss = [], squared_error(x, y, theta)

    def batch_loss(rows):
        seen.append(rows)
        return loss(rows)

    config = TrainingConfig(lr=0.05, max_epochs=3, batch_size=8)
    generator = make_generator(7)
    fit_parameters([theta], batch_loss, n_rows=20, config=config, generator=generator)
    replay = make_generator(7)
    expected = [rows for _ in range(3) for rows in torch.randperm(20, generator=replay).split(8)]
    assert [len(rows) for rows in seen] == [8, 8, 4] * 3
    assert all(torch.equal(a, b) for a, b in zip(seen, expected, strict=True))
    assert torch.equal(generator.get_state(), replay.get_state())


def test_same_generator_seed_gives_the_same_parameters():
    config = TrainingConfig(lr=0.05, max_epochs=10, batch_size=4)
    results = []
    for seed in (3, 3, 4):
        x, y, theta = linear_problem()
        fit_parameters([theta], squared_error(x, y, theta), n_rows=20, config=config,
                       generator=make_generator(seed))
        results.append(theta.detach())
    assert torch.equal(results[0], results[1]) and not torch.equal(results[0], results[2])
    torch.testing.assert_close(results[0], torch.tensor([2.0, -1.0], dtype=torch.float64),
                               atol=0.3, rtol=0)


def test_full_batch_draws_nothing_and_equals_one_minibatch_of_every_row():
    x, y, full = linear_problem()
    seen, loss = [], squared_error(x, y, full)

    def full_loss(rows):
        seen.append(rows)
        return loss(rows)

    generator = make_generator(1)
    state = generator.get_state()
    config = TrainingConfig(lr=0.05, max_epochs=4)
    fit_parameters([full], full_loss, n_rows=20, config=config, generator=generator)
    assert seen == [ALL_ROWS] * 4 and torch.equal(generator.get_state(), state)
    *_, one_batch = linear_problem()
    config = TrainingConfig(lr=0.05, max_epochs=4, batch_size=20)
    fit_parameters([one_batch], squared_error(x, y, one_batch), n_rows=20, config=config,
                   generator=generator)
    assert not torch.equal(generator.get_state(), state)  # a permutation was drawn each epoch
    torch.testing.assert_close(one_batch.detach(), full.detach(), rtol=1e-12, atol=1e-12)


def test_minibatches_need_an_explicit_generator_and_names_are_checked():
    theta = torch.zeros(1, requires_grad=True)
    with pytest.raises(ValueError, match="explicit torch.Generator"):
        fit_parameters([theta], lambda rows: theta.sum(), n_rows=4,
                       config=TrainingConfig(lr=0.1, max_epochs=1, batch_size=2))
    with pytest.raises(ConfigError, match="training.optimizer='rmsprop'"):
        TrainingConfig(lr=0.1, max_epochs=1, optimizer="rmsprop")
    with pytest.raises(ConfigError, match="training.schedule='linear'"):
        TrainingConfig(lr=0.1, max_epochs=1, schedule="linear")


@pytest.mark.parametrize(("nesterov", "expected"), [
    # unit gradient, lr 0.1, momentum 0.9: buffers 1, 1.9, 2.71
    (False, -0.1 * (1 + 1.9 + 2.71)),
    # Nesterov steps along g + 0.9 * buffer: 1.9, 2.71, 3.439
    (True, -0.1 * (1.9 + 2.71 + 3.439)),
])
def test_sgd_uses_heavy_ball_or_nesterov_momentum(nesterov, expected):
    theta = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    config = TrainingConfig(lr=0.1, max_epochs=3, optimizer="sgd", momentum=0.9,
                            nesterov=nesterov)
    fit_parameters([theta], lambda rows: theta.sum(), n_rows=1, config=config)
    assert float(theta.detach()) == pytest.approx(expected, rel=1e-12)


def test_cosine_schedule_anneals_to_min_lr():
    theta = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    config = TrainingConfig(lr=1.0, max_epochs=4, optimizer="sgd", schedule="cosine",
                            min_lr=0.2)
    fit_parameters([theta], lambda rows: theta.sum(), n_rows=1, config=config)
    # lr_t = 0.2 + 0.8 (1 + cos(pi t / 4)) / 2 for t = 0..3 sums to 0.8 + 0.8 * 2.5
    assert float(theta.detach()) == pytest.approx(-(0.8 + 0.8 * 2.5), rel=1e-12)


def test_resuming_after_an_epoch_callback_equals_the_uninterrupted_run():
    config = TrainingConfig(lr=0.05, max_epochs=5, batch_size=6, schedule="cosine")
    x, y, straight = linear_problem()
    seen = []
    fit_parameters([straight], squared_error(x, y, straight), n_rows=20, config=config,
                   generator=make_generator(2), on_epoch_end=lambda s: seen.append(s.epochs_done))
    assert seen == [1, 2, 3, 4, 5]

    saved = {}

    def stop_after_two(state: LoopState) -> None:
        saved.update(state=state, theta=resumed.detach().clone(), rng=generator.get_state())
        if state.epochs_done == 2:
            raise KeyboardInterrupt

    x, y, resumed = linear_problem()
    generator = make_generator(2)
    with pytest.raises(KeyboardInterrupt):
        fit_parameters([resumed], squared_error(x, y, resumed), n_rows=20, config=config,
                       generator=generator, on_epoch_end=stop_after_two)
    assert not torch.equal(resumed.detach(), straight.detach())
    with torch.no_grad():
        resumed.copy_(saved["theta"])
    generator = make_generator(99)
    generator.set_state(saved["rng"])
    history = fit_parameters([resumed], squared_error(x, y, resumed), n_rows=20, config=config,
                             generator=generator, resume=saved["state"])
    assert history.epochs == 5
    assert torch.equal(resumed.detach(), straight.detach())


def test_per_step_cosine_runs_over_every_optimizer_step():
    theta = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    config = TrainingConfig(lr=1.0, max_epochs=2, batch_size=2, optimizer="sgd",
                            schedule="cosine", schedule_unit="step")
    fit_parameters([theta], lambda rows: theta.sum(), n_rows=3, config=config,
                   generator=make_generator(0))
    # 2 steps per epoch (ceil(3 / 2)), so T = 4 steps: sum of (1 + cos(pi t / 4)) / 2 = 2.5
    assert float(theta.detach()) == pytest.approx(-2.5, rel=1e-12)
    with pytest.raises(ConfigError, match="training.schedule_unit"):
        TrainingConfig(lr=1.0, max_epochs=1, schedule_unit="batch")


def test_an_optimizer_built_by_the_caller_replaces_the_configured_one():
    theta = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    config = TrainingConfig(lr=1.0, max_epochs=3, optimizer="adam")
    fit_parameters([theta], lambda rows: theta.sum(), n_rows=1, config=config,
                   optimizer=torch.optim.SGD([theta], lr=0.5))
    assert float(theta.detach()) == pytest.approx(-1.5, rel=1e-12)
