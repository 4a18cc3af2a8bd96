"""Fixed-step HMC on a flat parameter vector that replays pyro's ``HMC`` kernel draw for draw.

:func:`sample_hmc` runs the transitions of ``pyro.infer.mcmc.HMC`` with step-size and mass-matrix
adaptation off and a diagonal inverse mass matrix filled with one scalar (``BlockMassMatrix
(init_scale=...)``), driven by ``pyro.infer.mcmc.MCMC``: the same tensor operations in the same
order, and the same draws from the global torch RNG in the same order (one standard normal
momentum vector ``torch.normal(0, 1)`` of size q, then one uniform ``torch.rand(())`` for the
Metropolis test, per transition). Its kept states are therefore equal, bit for bit, to pyro's,
and the global RNG ends in the same state (``tests/unit/training/test_hmc_sampler.py`` checks
both against pyro). What it leaves out is pyro's bookkeeping around that arithmetic: the
site-name dictionaries and their copies, the concatenation and slicing of the one block in the
mass-matrix adapter, ``pyro.sample`` dispatch, the runner's generator and per-sample hook.

One transition, with M^-1 = ``inverse_mass`` I, step size eps and L leapfrog steps:
r = M^{1/2} n with n ~ N(0, I); H = n.n / 2 + U(theta); L steps of velocity Verlet
(r -= eps/2 grad U, theta += eps M^-1 r, r -= eps/2 grad U); H' = u.u / 2 + U(theta') with
u = M^{-1/2} r'; accept when a uniform draw is below min(1, exp(H - H')) (a NaN H' rejects).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.progress import progress
from bench.models.activations import ACTIVATIONS
from bench.models.mlp import MLPShape

# Each activation's backward as autograd computes it from the activation's output.
_BACKWARD_FROM_OUTPUT = {
    "tanh": torch.ops.aten.tanh_backward,
    "sigmoid": torch.ops.aten.sigmoid_backward,
    "relu": lambda grad, out: torch.ops.aten.threshold_backward(grad, out, 0),
}


@dataclass
class HMCRun:
    """Kept states ``[num_kept, q]`` and how many kept transitions accepted their proposal."""

    samples: Tensor
    accepted: int

    @property
    def acceptance_rate(self) -> float:
        """Fraction of the kept transitions that accepted their proposal."""
        return self.accepted / max(int(self.samples.shape[0]), 1)


def potential_and_grad(potential: Callable[[Tensor], Tensor],
                       theta: Tensor) -> tuple[Tensor, Tensor]:
    """(grad U(theta), U(theta) detached) by reverse mode, as pyro's ``potential_grad``."""
    theta.requires_grad_(True)
    energy = potential(theta)
    (grad,) = torch.autograd.grad(energy, (theta,))
    theta.requires_grad_(False)
    return grad, energy.detach()


class GaussianMLPPotential:
    """U(theta) = (tau_out sum (y - f_theta(x))^2 + tau_in |theta|^2) / 2 for a single-output
    :class:`~bench.models.mlp.MLPShape`, with its gradient by explicit backpropagation.

    Called on theta it returns (grad U, U) equal bit for bit to reverse mode through
    ``MLPShape.forward_1d`` (same forward kernels; the backward kernels autograd's formulas
    call, on tensors of the same layout), at a fraction of the autograd engine's per-call
    overhead on a small network. ``tests/unit/training/test_hmc_sampler.py`` checks the
    equality against :func:`potential_and_grad`.
    """

    def __init__(self, shape: MLPShape, x: Tensor, y: Tensor, tau_in: float,
                 tau_out: float) -> None:
        if shape.widths[-1] != 1 or any(a not in _BACKWARD_FROM_OUTPUT for a in shape.activations):
            raise ValueError("GaussianMLPPotential needs a single output and activations in "
                             f"{sorted(_BACKWARD_FROM_OUTPUT)}")
        self.shape, self.x, self.y = shape, x, y
        self.tau_in, self.tau_out = tau_in, tau_out

    def energy(self, theta: Tensor) -> Tensor:
        """U(theta), the expression differentiated by autograd on the reference path."""
        return self._energy(self.y - self.shape.forward_1d(theta, self.x), theta)

    def _energy(self, residual: Tensor, theta: Tensor) -> Tensor:
        return 0.5 * (self.tau_out * residual.square().sum()
                      + self.tau_in * theta.square().sum())

    def __call__(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        layers = self.shape.unflatten(theta)
        inputs, h = [], self.x
        for (weight, bias), name in zip(layers[:-1], self.shape.activations, strict=True):
            inputs.append(h)
            h = ACTIVATIONS[name].function(h @ weight.T + bias)
        inputs.append(h)
        weight, bias = layers[-1]
        residual = self.y - (h @ weight.T + bias)[:, 0]
        energy = self._energy(residual, theta)
        # Reverse sweep in autograd's order and kernels: d(0.5 C) = 0.5, then the products by
        # tau, square's grad * (2 x), subtraction's negation, mm's grad.t().mm(input) for the
        # weight and grad.mm(weight) for the input, bias grads as sums over the batch.
        seed = torch.ones_like(energy) * 0.5
        grad_out = (-((seed * self.tau_out).expand_as(residual) * (2.0 * residual))).unsqueeze(1)
        blocks = []
        for i in range(len(layers) - 1, -1, -1):
            weight, _ = layers[i]
            blocks.append(grad_out.sum(0))
            blocks.append(grad_out.t().mm(inputs[i]).reshape(-1))
            if i > 0:
                backward = _BACKWARD_FROM_OUTPUT[self.shape.activations[i - 1]]
                grad_out = backward(grad_out.mm(weight), inputs[i])
        prior = (seed * self.tau_in).expand_as(theta) * (2.0 * theta)
        return prior + torch.cat(blocks[::-1]), energy


def sample_hmc(gradient: Callable[[Tensor], tuple[Tensor, Tensor]], theta0: Tensor, *,
               step_size: float, num_steps: int, inverse_mass: float, num_samples: int,
               burn: int, desc: str = "hmc") -> HMCRun:
    """Run ``num_samples`` HMC transitions from ``theta0`` and keep the last
    ``num_samples - burn`` states (pyro's ``warmup_steps=burn``, ``num_samples=num_samples -
    burn``). ``gradient`` maps a flat ``[q]`` tensor to (grad U, U): a
    :class:`GaussianMLPPotential`, or ``functools.partial(potential_and_grad, potential)``
    for any differentiable potential. Draws come from the global torch RNG of ``theta0``'s
    device, as in pyro."""
    grad, energy = gradient(theta0.detach())
    theta = theta0
    options = {"dtype": energy.dtype, "device": energy.device}
    size = theta0.numel()
    inverse_mass_diagonal = torch.full((size,), inverse_mass, **options)
    sqrt_inverse_mass = inverse_mass_diagonal.sqrt()
    sqrt_mass = sqrt_inverse_mass.reciprocal()
    zeros, ones = torch.zeros(size, **options), torch.ones(size, **options)
    half_step = 0.5 * step_size
    kept = torch.empty((num_samples - burn, size), dtype=theta0.dtype, device=theta0.device)
    accepted = 0
    for t in progress(range(num_samples), desc=desc, total=num_samples):
        with torch.no_grad():
            momentum_unscaled = torch.normal(zeros, ones)
        momentum = sqrt_mass.mul(momentum_unscaled)
        energy_current = 0.5 * momentum_unscaled.dot(momentum_unscaled) + energy
        proposal, proposal_grad = theta, grad
        for _ in range(num_steps):
            momentum = momentum + half_step * (-proposal_grad)
            proposal = proposal + step_size * inverse_mass_diagonal.mul(momentum)
            proposal_grad, proposal_energy = gradient(proposal)
            momentum = momentum + half_step * (-proposal_grad)
        momentum_unscaled = sqrt_inverse_mass.mul(momentum)
        energy_proposal = 0.5 * momentum_unscaled.dot(momentum_unscaled) + proposal_energy
        delta_energy = energy_proposal - energy_current
        if math.isnan(delta_energy):
            delta_energy = torch.full_like(delta_energy, math.inf)
        accept_prob = (-delta_energy).exp().clamp(max=1.0)
        with torch.no_grad():
            uniform = torch.rand((), **options)
        if uniform < accept_prob:
            theta, grad, energy = proposal, proposal_grad, proposal_energy
            accepted += int(t >= burn)
        if t >= burn:
            kept[t - burn] = theta.reshape(-1)
    return HMCRun(kept, accepted)
