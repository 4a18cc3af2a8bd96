"""Tiny float64 networks and their dense GGNs from ``torch.func.jacrev`` (test references)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev

from bench.curvature.module_curvature import curvature_layers, flat_parameters


def tiny_conv_net(seed: int = 0) -> nn.Module:
    """Conv(1->2, 3x3, pad 1) -> ReLU -> MaxPool 2 -> Linear(8, 5) -> Tanh -> Linear(5, 3):
    83 parameters, float64, inputs ``[n, 1, 5, 5]``."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8, 5), nn.Tanh(), nn.Linear(5, 3)).double()


def tiny_batchnorm_net(seed: int = 0) -> nn.Module:
    """Conv(1->2, 3x3, pad 1, no bias) -> BatchNorm2d(2) -> ReLU -> MaxPool 2 -> Linear(8, 5)
    -> Tanh -> Linear(5, 3), float64, in eval mode, with non-trivial batch norm affine
    parameters and running statistics: 81 curvature parameters (18 + 45 + 18) and 4 batch norm
    parameters, inputs ``[n, 1, 5, 5]``."""
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, bias=False), nn.BatchNorm2d(2),
                        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 5), nn.Tanh(),
                        nn.Linear(5, 3)).double()
    norm = net[1]
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.5, 0.7]))
        norm.bias.copy_(torch.tensor([0.2, -0.1]))
        norm.running_mean.copy_(torch.tensor([0.1, -0.3]))
        norm.running_var.copy_(torch.tensor([0.8, 1.6]))
    return net.eval()


def tiny_mlp(widths=(4, 3, 3), seed: int = 0) -> nn.Module:
    """Linear -> Tanh -> Linear MLP of the given widths, float64."""
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers += [nn.Linear(fan_in, fan_out)] + ([nn.Tanh()] if i < len(widths) - 2 else [])
    return nn.Sequential(*layers).double()


def lenet5() -> nn.Module:
    """LeNet-5 of Generalized Laplace Table 1 (61,706 parameters), inputs ``[n, 1, 28, 28]``."""
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def jacobian(model: nn.Module, x: Tensor) -> Tensor:
    """``d f(x_n) / d theta`` ``[n, C, q]`` in the curvature layout (the curvature layers'
    parameters; normalisation layers held at their values)."""
    named = dict(model.named_parameters())
    names = [n for layer in curvature_layers(model) for n in layer.parameter_names]
    shapes = [named[n].shape for n in names]

    def outputs(theta: Tensor) -> Tensor:
        params, start = {}, 0
        for name, shape in zip(names, shapes, strict=True):
            params[name] = theta[start:start + shape.numel()].view(shape)
            start += shape.numel()
        return functional_call(model, params, (x,))

    return jacrev(outputs)(flat_parameters(model))


def dense_ggn(model: nn.Module, x: Tensor) -> Tensor:
    """The exact GGN of softmax cross-entropy ``sum_n J_n^T (diag p - p p^T) J_n``."""
    jac = jacobian(model, x)
    p = torch.softmax(model(x), dim=-1).detach()
    hessian = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
    return torch.einsum("ncq,ncd,ndr->qr", jac, hessian, jac)


def dense_empirical_fisher(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """``sum_n J_n^T (p_n - e_yn)(p_n - e_yn)^T J_n``."""
    jac = jacobian(model, x)
    p = torch.softmax(model(x), dim=-1).detach()
    grad = torch.einsum("ncq,nc->nq", jac, p - torch.eye(p.shape[-1], dtype=p.dtype)[y])
    return grad.T @ grad


def block_mask(sizes: list[int]) -> Tensor:
    """Boolean ``q x q`` mask of the per-layer diagonal blocks."""
    return torch.block_diag(*[torch.ones(s, s) for s in sizes]).bool()
