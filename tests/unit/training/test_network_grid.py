"""Batched training of a grid of networks equals training them one by one."""

from __future__ import annotations

import torch

from bench.harness.rng import make_generator
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood
from bench.models.mlp import MLPShape, init_parameters
from bench.training.network_grid import negative_log_joint, train_network_grid

SHAPE = MLPShape((1, 5, 5, 1), "tanh")


def data():
    generator = make_generator(0)
    x = torch.rand(15, 1, generator=generator, dtype=torch.float64) * 4 - 2
    return x, torch.sin(2 * x[:, 0])


def test_batched_grid_equals_one_by_one_training():
    x, y = data()
    deltas = torch.tensor([1e-3, 0.5, 20.0], dtype=torch.float64)
    noise = torch.tensor([[0.01], [0.1], [2.0]], dtype=torch.float64)
    initial = init_parameters(SHAPE, make_generator(1), torch.float64)
    batched = train_network_grid(SHAPE, x, y, GaussianLikelihood(noise), deltas, initial,
                                 lr=1e-2, steps=60)
    for b in range(3):
        single = train_network_grid(SHAPE, x, y, GaussianLikelihood(float(noise[b, 0])),
                                    deltas[b:b + 1], initial, lr=1e-2, steps=60)
        torch.testing.assert_close(batched.theta[b], single.theta[0], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(batched.gradient_norm[b], single.gradient_norm[0],
                                   rtol=1e-8, atol=1e-12)
    assert not torch.equal(batched.theta[0], batched.theta[2])


def test_objective_and_gradient_norm_are_each_networks_own():
    x, y = data()
    deltas = torch.tensor([0.1, 3.0], dtype=torch.float64)
    labels = (y > 0).to(torch.float64)
    fit = train_network_grid(SHAPE, x, labels, BernoulliLikelihood(), deltas,
                             init_parameters(SHAPE, make_generator(2), torch.float64),
                             lr=1e-2, steps=200)
    for b in range(2):
        theta = fit.theta[b].clone().requires_grad_(True)
        loss = negative_log_joint(SHAPE, theta.unsqueeze(0), x, labels, BernoulliLikelihood(),
                                  deltas[b:b + 1])[0]
        (gradient,) = torch.autograd.grad(loss, theta)
        torch.testing.assert_close(fit.objective[b], loss.detach())
        torch.testing.assert_close(fit.gradient_norm[b], gradient.norm())
        manual = (-(labels * SHAPE.forward_1d(fit.theta[b], x)
                    - torch.nn.functional.softplus(SHAPE.forward_1d(fit.theta[b], x))).sum()
                  + 0.5 * deltas[b] * fit.theta[b].pow(2).sum())
        torch.testing.assert_close(fit.objective[b], manual)
