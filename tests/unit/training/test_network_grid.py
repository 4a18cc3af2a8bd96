"""Batched training of a grid of networks equals training them one by one; the L-BFGS polish
of a grid reaches each network's own minimum (closed form for a linear network)."""

from __future__ import annotations

import torch

from bench.harness.rng import make_generator
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood
from bench.models.mlp import MLPShape, init_parameters
from bench.training.network_grid import (
    negative_log_joint,
    polish_network_grid,
    train_network_grid,
)

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


def test_polished_grid_reaches_each_networks_ridge_solution():
    """A network without hidden layers is linear, f = w.x + b, so each grid point's MAP under a
    Gaussian likelihood is ridge regression with its own delta (bias penalised too)."""
    generator = make_generator(3)
    x = torch.randn(20, 2, generator=generator, dtype=torch.float64)
    y = x @ torch.tensor([1.5, -2.0], dtype=torch.float64) + 0.3
    shape, noise = MLPShape((2, 1), "tanh"), 0.5
    deltas = torch.tensor([0.1, 1.0, 10.0], dtype=torch.float64)
    likelihood = GaussianLikelihood(noise)
    adam = train_network_grid(shape, x, y, likelihood, deltas,
                              init_parameters(shape, make_generator(4), torch.float64),
                              lr=1e-2, steps=5)
    polished = polish_network_grid(shape, adam, x, y, likelihood, deltas, max_iterations=200,
                                   gradient_tolerance=1e-6)
    design = torch.cat([x, torch.ones(20, 1, dtype=torch.float64)], dim=1)
    for b, delta in enumerate(deltas):
        ridge = torch.linalg.solve(design.T @ design / noise + delta * torch.eye(3,
                                                                               dtype=x.dtype),
                                   design.T @ y / noise)
        torch.testing.assert_close(polished.theta[b], ridge, rtol=1e-7, atol=1e-9)
    assert float(polished.gradient_norm.max()) <= 1e-6 < float(adam.gradient_norm.min())
    torch.testing.assert_close(polished.adam_gradient_norm, adam.gradient_norm)
    assert adam.adam_gradient_norm is None and adam.polish_iterations == ()
    assert len(polished.polish_iterations) == 3 and min(polished.polish_iterations) > 0
    torch.testing.assert_close(polished.objective, negative_log_joint(
        shape, polished.theta, x, y, likelihood, deltas))
