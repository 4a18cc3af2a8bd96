"""The training choices looked up by name: optimizers, schedules and schedule units of the
loop, where a classifier stage puts its weight decay, the working network's data loss and
the replication schedules; each equals the branch it replaced."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.harness.errors import ConfigError
from bench.training.classifier import WEIGHT_DECAY_PLACEMENTS, TrainingStage, l2_penalty
from bench.training.loop import TrainingConfig
from bench.training.optimizer_choices import (
    OPTIMIZER_BUILDERS,
    SCHEDULE_BUILDERS,
    SCHEDULE_UNITS,
)
from bench.training.working_network import DATA_LOSSES, data_loss, paper_schedule


@pytest.mark.parametrize(("name", "cls"), [("adam", torch.optim.Adam),
                                           ("adamw", torch.optim.AdamW),
                                           ("sgd", torch.optim.SGD)])
def test_optimizer_builders_take_the_config_settings(name, cls):
    config = TrainingConfig(lr=0.3, max_epochs=2, optimizer=name, weight_decay=0.01,
                            momentum=0.9 if name == "sgd" else 0.0, nesterov=name == "sgd")
    optimizer = OPTIMIZER_BUILDERS[name]([nn.Parameter(torch.zeros(2))], config)
    group = optimizer.param_groups[0]
    assert type(optimizer) is cls and group["lr"] == 0.3 and group["weight_decay"] == 0.01
    if name == "sgd":
        assert group["momentum"] == 0.9 and group["nesterov"]


def test_schedule_builders_and_units():
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    config = TrainingConfig(lr=1.0, max_epochs=3, schedule="cosine", min_lr=0.1,
                            schedule_unit="step", step_every=2, step_factor=0.5)
    unit = SCHEDULE_UNITS[config.schedule_unit]
    assert unit.per_step and unit.units(3, 4) == 12
    assert SCHEDULE_UNITS["epoch"].units(3, 4) == 3
    assert SCHEDULE_BUILDERS["none"](optimizer, config, 12) is None
    cosine = SCHEDULE_BUILDERS["cosine"](optimizer, config, 12)
    assert cosine.T_max == 12 and cosine.eta_min == 0.1
    step = SCHEDULE_BUILDERS["step"](optimizer, config, 12)
    assert step.step_size == 2 and step.gamma == 0.5


def test_weight_decay_placements():
    parameters = [torch.tensor([1.0, 2.0]), torch.tensor([3.0])]
    loss = torch.tensor(0.5)
    optimizer, objective = WEIGHT_DECAY_PLACEMENTS["optimizer"], WEIGHT_DECAY_PLACEMENTS[
        "objective"]
    assert optimizer.optimizer_weight_decay(0.2) == 0.2
    assert objective.optimizer_weight_decay(0.2) == 0.0
    assert optimizer.objective(loss, 0.2, parameters) is loss
    assert float(objective.objective(loss, 0.2, parameters)) == pytest.approx(0.5 + 0.1 * 14)
    assert float(l2_penalty(parameters)) == 14.0
    stage = TrainingStage(epochs=1, lr=0.1, batch_size=2, weight_decay=0.2,
                          weight_decay_mode="objective")
    assert stage.loop_config().weight_decay == 0.0


def test_data_losses_are_the_gaussian_and_bernoulli_negative_log_likelihoods():
    f, y = torch.tensor([0.5, -1.0]), torch.tensor([1.0, 0.0])
    assert float(DATA_LOSSES["regression"](f, y, 0.5)) == pytest.approx((0.25 + 1.0) / 2)
    torch.testing.assert_close(data_loss(f, y, "classification"),
                               F.binary_cross_entropy_with_logits(f, y))
    with pytest.raises(ConfigError, match="likelihood='poisson' is not valid; choose one of: "
                                          "regression, classification"):
        data_loss(f, y, "poisson")


def test_paper_schedules_by_experiment():
    assert paper_schedule("exp1", "classification", "wellspecified").epochs == 1500
    assert paper_schedule("exp2", "classification", "wellspecified").lr == 0.001
    with pytest.raises(ConfigError, match="experiment='exp3' is not valid; choose one of: "
                                          "exp1, exp2"):
        paper_schedule("exp3", "regression", "misspecified")
