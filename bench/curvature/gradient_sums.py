"""Curvature sums over minibatches of per-layer inputs and output gradients.

A :class:`LayerBatch` holds, for one minibatch, each layer's inputs ``a`` ``[n, positions, in
(+1)]`` (a trailing 1 for a bias) and, per output-space vector ``v_k``, the gradient ``g`` of
``v_k^T f`` at each layer's output ``[n, positions, out]``. The per-example gradient of a
layer's matrix ``V = [W | b]`` is ``sum_p g_p a_p^T`` (:func:`per_example_gradients`); each
function here sums one structure's statistic of them over the batches and vectors, in float64
(:data:`ACCUMULATE`), as :class:`bench.curvature.module_curvature.ModuleBackend` serves them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from bench.curvature.kronecker import layer_vector

ACCUMULATE = torch.float64


@dataclass
class LayerBatch:
    """One minibatch: per layer its inputs and the gradients of each output vector."""

    inputs: list[Tensor]
    grads: list[list[Tensor]]  # [k][layer]


def per_example_gradients(g: Tensor, a: Tensor) -> Tensor:
    """Per-example gradients ``[n, out, in (+1)]`` from output grads and inputs."""
    return torch.einsum("npo,npi->noi", g, a)


def flatten_layer(matrix: Tensor, has_bias: bool) -> Tensor:
    """``[..., out, in (+1)]`` to the layer's flat parameter layout."""
    return layer_vector(matrix) if has_bias else matrix.flatten(-2)


def squared_gradient_sums(batches: Iterable[LayerBatch], n_layers: int) -> list[Tensor]:
    """Per layer ``sum_nk grad_nk^2`` as ``[out, in (+1)]``."""
    total: list[Tensor | int] = [0] * n_layers
    for batch in batches:
        for grads in batch.grads:
            for i, (a, g) in enumerate(zip(batch.inputs, grads, strict=True)):
                if a.shape[1] == 1:  # no weight sharing: (g a^T)^2 = g^2 a^2^T
                    square = torch.einsum("no,ni->oi", g[:, 0] ** 2, a[:, 0] ** 2)
                else:
                    square = (per_example_gradients(g, a) ** 2).sum(0)
                total[i] = total[i] + square.to(ACCUMULATE)
    return total


def kronecker_sums(batches: Iterable[LayerBatch], n_layers: int) -> list[tuple[Tensor, Tensor]]:
    """Per layer ``(A, G)``: ``A`` the mean of ``q q^T`` over data and positions, ``G`` the sum
    of ``g g^T`` over data, positions and output vectors."""
    inputs: list[Tensor | int] = [0] * n_layers
    grads: list[Tensor | int] = [0] * n_layers
    count = [0] * n_layers
    for batch in batches:
        for i, a in enumerate(batch.inputs):
            flat = a.reshape(-1, a.shape[-1])
            inputs[i] = inputs[i] + (flat.T @ flat).to(ACCUMULATE)
            count[i] += flat.shape[0]
        for layer_grads in batch.grads:
            for i, g in enumerate(layer_grads):
                flat = g.reshape(-1, g.shape[-1])
                grads[i] = grads[i] + (flat.T @ flat).to(ACCUMULATE)
    return [(a / c, g) for a, g, c in zip(inputs, grads, count, strict=True)]


def eigenbasis_squared_sums(batches: Iterable[LayerBatch], bases: list[tuple[Tensor, Tensor]]
                            ) -> list[Tensor]:
    """Per layer ``sum_nk (U_G^T grad_nk U_Q)^2`` ``[out, in (+ 1)]`` (EKFAC's eigenvalues)."""
    total: list[Tensor | int] = [0] * len(bases)
    for batch in batches:
        rotated_inputs = [a @ u_a.to(a.dtype) for a, (u_a, _) in
                          zip(batch.inputs, bases, strict=True)]
        for grads in batch.grads:
            for i, (a, g) in enumerate(zip(rotated_inputs, grads, strict=True)):
                rotated = per_example_gradients(g @ bases[i][1].to(g.dtype), a)
                total[i] = total[i] + (rotated**2).sum(0).to(ACCUMULATE)
    return total


def _flat_gradients(batch: LayerBatch, grads: list[Tensor], biases: list[bool]) -> list[Tensor]:
    """Per layer the per-example gradients ``[n, size]`` in the layer's parameter layout."""
    return [flatten_layer(per_example_gradients(g, a), bias).to(ACCUMULATE)
            for a, g, bias in zip(batch.inputs, grads, biases, strict=True)]


def layer_outer_product_sums(batches: Iterable[LayerBatch], biases: list[bool]) -> list[Tensor]:
    """Per layer the dense ``sum_nk grad_nk grad_nk^T`` in the layer's parameter layout."""
    total: list[Tensor | int] = [0] * len(biases)
    for batch in batches:
        for grads in batch.grads:
            for i, flat in enumerate(_flat_gradients(batch, grads, biases)):
                total[i] = total[i] + flat.T @ flat
    return total


def outer_product_sum(batches: Iterable[LayerBatch], biases: list[bool]) -> Tensor:
    """The dense ``sum_nk grad_nk grad_nk^T`` over every layer's parameters (layer order)."""
    total: Tensor | int = 0
    for batch in batches:
        for grads in batch.grads:
            flat = torch.cat(_flat_gradients(batch, grads, biases), dim=1)
            total = total + flat.T @ flat
    return total
