"""The subnetwork paper's working-network training: schedules and draws."""

from __future__ import annotations

import torch

from bench.datasets.synthetic_networks import make_dataset
from bench.harness.rng import make_generator
from bench.models.mlp import MLPShape, init_parameters
from bench.training.working_network import (
    Schedule,
    paper_schedule,
    train_working_network,
    validation_split,
)


def test_paper_schedules():
    assert paper_schedule("exp1", "regression", "misspecified") == Schedule(0.01, 1500, 500)
    assert paper_schedule("exp2", "classification", "wellspecified").lr == 0.001
    assert paper_schedule("exp2", "regression", "wellspecified").decay_every == 1000


def test_full_batch_training_draws_only_the_split_and_the_initialisation():
    data = make_dataset("exp1", "misspecified", "regression", make_generator(0), n_train=40,
                        n_test=5)
    network = MLPShape((5, 6, 6, 1), ("tanh", "sigmoid"))
    generator = make_generator(1)
    trained = train_working_network(network, data.x_train, data.y_train, "regression",
                                    Schedule(0.01, 20, 10), generator)
    replay = make_generator(1)
    x_fit, *_ = validation_split(data.x_train, data.y_train, 0.1, replay)
    theta0 = init_parameters(network, replay, torch.float64)
    assert torch.equal(generator.get_state(), replay.get_state())
    assert torch.equal(trained.x_fit, x_fit) and len(trained.x_val) == 4
    assert not torch.equal(trained.theta, theta0)
    minibatch = train_working_network(network, data.x_train, data.y_train, "regression",
                                      Schedule(0.01, 20, 10), make_generator(1), batch_size=36)
    assert torch.equal(minibatch.theta, trained.theta)  # a batch of every row is full batch
