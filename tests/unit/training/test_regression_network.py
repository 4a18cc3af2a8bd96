"""The MAP regression MLP behind the Laplace-family methods."""

from __future__ import annotations

import math

import pytest
import torch

from bench.datasets.toy import heteroscedastic_toy
from bench.training.regression_network import log_joint_gradient, train_map_mlp


@pytest.fixture(scope="module")
def toy():
    """Lightning-UQ-Box's heteroscedastic toy with 60 points."""
    return heteroscedastic_toy(3, n_points=60)


def test_map_mlp_keeps_the_best_validation_epoch(toy):
    base = train_map_mlp(toy, seed=3, lr=0.05, batch_size=16, n_hidden=(8,), max_epochs=200,
                         patience=3)
    diagnostics = base.diagnostics
    assert diagnostics["epochs"] == diagnostics["best_epoch"] + 4 < 200
    x_val, y_val = toy.x_val.double(), toy.y_val[:, 0].double()
    log_sigma = torch.tensor(math.log(diagnostics["sigma_at_best"]), dtype=torch.float64)
    residual = base.shape.forward_1d(base.theta, x_val) - y_val
    nll = (0.5 * residual**2 * torch.exp(-2 * log_sigma) + log_sigma).mean()
    assert float(nll) == pytest.approx(diagnostics["val_nll"], rel=1e-12)
    x = toy.x_train.double()
    assert base.noise_variance == pytest.approx(
        float(((base.predict(x) - toy.y_train[:, 0].double()) ** 2).mean()), rel=1e-12)
    torch.testing.assert_close(base.module()(x)[:, 0], base.predict(x))


def test_map_mlp_and_paper_mlp_take_keyword_arguments():
    from bench.training.regression_network import train_paper_mlp

    for train in (train_map_mlp, train_paper_mlp):
        with pytest.raises(TypeError, match="positional argument"):
            train(None, 3, 0.01, 16)


@pytest.mark.second_tier
def test_map_polish_makes_theta_hat_stationary(toy):
    x, y = toy.x_train.double(), toy.y_train[:, 0].double()
    # tanh: smooth, so L-BFGS reaches a stationary point; ReLU's kinks stop it nearby.
    for activation, tolerance in (("tanh", 1e-4), ("relu", 2.0)):
        base = train_map_mlp(toy, seed=3, lr=0.01, batch_size=16, n_hidden=(8,),
                             activation=activation, max_epochs=30, patience=5, polish_rounds=2)
        gradient = log_joint_gradient(base.shape, base.theta, x, y, base.noise_variance,
                                      base.prior_precision)
        assert base.diagnostics["grad_norm_before_polish"] > 3.0
        assert float(gradient.norm()) < tolerance
