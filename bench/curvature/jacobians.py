"""Jacobians ``d f(x_n) / d theta`` of a network, one block per input: of a single-output
network (:func:`output_jacobians`), of a classifier's logits (:func:`logit_jacobians`), and the
GGN built from single-output rows (:func:`jacobian_ggn`).

The rows are in the layout of the module's parameters (``named_parameters()`` order, each
tensor flattened row-major), the layout of :func:`flat_parameters`. They are computed with
``torch.func`` (``vmap`` of ``jacrev`` over the inputs, ``batch_size`` inputs at a time), in the
dtype of the module's parameters: convert a copy of the module with ``.double()`` for float64
rows (reproduction notes of the GGN thesis, section 1: do the P x P and N x P algebra in float64).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def flat_parameters(model: nn.Module) -> Tensor:
    """Every parameter of ``model`` (``named_parameters()`` order) as one detached vector."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def output_jacobians(model: nn.Module, x: Tensor, batch_size: int | None = None) -> Tensor:
    """Rows ``d f(x_n) / d theta`` ``[n, P]`` of a single-output ``model`` at inputs ``x``
    (``[n, ...]``), ``batch_size`` inputs per vmapped pass (None: all at once)."""
    params = {name: value.detach() for name, value in model.named_parameters()}

    def output(values: dict[str, Tensor], xi: Tensor) -> Tensor:
        out = torch.func.functional_call(model, values, (xi.unsqueeze(0),))
        if out.numel() != 1:
            raise ValueError(f"jacobians need a single-output model; it gives {out.numel()}")
        return out.reshape(())

    rows_of = torch.func.vmap(torch.func.jacrev(output), in_dims=(None, 0))
    chunks = [x] if batch_size is None else x.split(batch_size)
    blocks = []
    for chunk in chunks:
        rows = rows_of(params, chunk)
        blocks.append(torch.cat([rows[name].reshape(len(chunk), -1) for name in params], dim=1))
    return torch.cat(blocks) if blocks else x.new_zeros((0, sum(v.numel() for v in
                                                                  params.values())))


def logit_jacobians(model: nn.Module, params: dict[str, Tensor], buffers: dict[str, Tensor],
                    x: Tensor) -> tuple[Tensor, Tensor]:
    """``(J, f)``: the Jacobians ``[n, C, P]`` of ``model``'s ``C`` outputs at each input of
    ``x`` with respect to ``params`` (name -> tensor, the layout of their concatenation), and the
    outputs ``[n, C]``; ``buffers`` complete the module's state.

    Each input goes through the network on its own (``vmap`` over the inputs of ``jacrev`` of
    one input's outputs): ``n * C`` backward rows of one input each. laplace-torch 0.3 takes
    ``jacrev`` of the whole batch's outputs instead, ``n * C`` rows of all ``n`` inputs, ``n``
    times the work for the same numbers. One input at a time is the batch's value only where
    inputs do not interact: a module in eval mode (BatchNorm on its running statistics).
    """
    def outputs(values: dict[str, Tensor], xi: Tensor) -> tuple[Tensor, Tensor]:
        out = torch.func.functional_call(model, (values, buffers), (xi.unsqueeze(0),))
        return out.squeeze(0), out.squeeze(0)

    blocks, f = torch.func.vmap(torch.func.jacrev(outputs, has_aux=True),
                                in_dims=(None, 0))(params, x)
    jacobian = torch.cat([blocks[name].flatten(start_dim=2) for name in params], dim=2)
    return jacobian, f


def jacobian_ggn(jacobian: Tensor, weights: Tensor) -> Tensor:
    """``G = sum_i w_i J_i^T J_i`` ``[P, P]`` for rows ``J_i`` of ``jacobian`` ``[N, P]``
    (negative weights count as zero), as ``R^T R`` with ``R = diag(sqrt(w)) J``."""
    rows = jacobian * weights.clamp_min(0).sqrt().unsqueeze(1)
    return rows.T @ rows
