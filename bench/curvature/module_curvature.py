"""Fisher / GGN curvature of an ``nn.Module`` (Linear and Conv2d layers), summed over data.

The curvature covers every Linear and Conv2d weight, and the bias where the layer has one.
Normalisation layers (BatchNorm, LayerNorm, GroupNorm) are not part of it: their affine
parameters and running statistics stay at their trained (MAP) values, and the network is
evaluated in eval mode (running statistics) during the curvature passes, whatever mode it was
in (restored afterwards). Any other module holding parameters is an error.

The curvature of a likelihood ``p(y | f(x))`` is ``F = sum_n sum_k J_n^T v_nk v_nk^T J_n``
with ``J_n`` the Jacobian of the network output at ``x_n`` and ``v_nk`` output-space vectors
(:func:`output_vectors`):

* classification (softmax cross-entropy): ``type-2`` is the exact GGN (``v_c = sqrt(p_c)
  (e_c - p)``, the columns of a square root of ``diag(p) - p p^T``); ``mc`` the Fisher with
  ``mc_samples`` labels drawn from the model per input (``v_s = (p - e_ys) / sqrt(S)``, an
  explicit generator); ``empirical`` the training labels' gradient outer products;
* regression (Gaussian, noise sd sigma): ``type-2`` is ``sigma^-2 sum J^T J``; ``mc`` draws
  ``y ~ N(f, sigma^2)``; ``empirical`` uses the residuals.

Each ``v`` is backpropagated once to every layer's output; with the layer's inputs (unfolded
over (in, kh, kw) for a Conv2d, the weight's own flattening) this gives per-example gradients
in the layout of the parameters: per layer the weight row-major, then the bias, layers in
module order (``parameters()`` order for the usual networks with the normalisation layers'
parameters left out, checked by :func:`curvature_layers`). Structures (:data:`STRUCTURES`),
as :mod:`bench.curvature` classes:

* ``diag``: :class:`Diagonal`, the summed squared per-example gradients;
* ``kfac``: :class:`Kronecker` with curvlinops' KFAC-expand conventions (input factor the
  mean of ``[a, 1][a, 1]^T`` over data and weight-sharing positions, ``a a^T`` for a layer
  without a bias; output factor the sum of ``g g^T``), so ``F_l ~ N E[qq^T] kron E[gg^T]``
  for a Linear layer;
* ``ekfac``: :class:`EigenKronecker`, KFAC's eigenbases with the eigenvalues refitted in a
  second pass as ``sum_nk ((U_G kron U_Q)^T grad_nk)^2`` (George et al. 2018);
* ``bdiag``: :class:`BlockDiagonal`, the exact dense block of each layer (at most
  ``max_block_size`` parameters per layer).

Our own accumulation rather than curvlinops' operators: one pass of per-example gradients
serves all four structures (curvlinops 3.0.1 has no exact diagonal and no per-layer dense
blocks), labels are drawn from an explicit generator, and the Gaussian likelihood of the
regression toy goes through the same code. Accumulators are float64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from bench.curvature.base import Curvature
from bench.curvature.dense import BlockDiagonal
from bench.curvature.diagonal import Diagonal
from bench.curvature.eigen_kronecker import EigenKronecker
from bench.curvature.kronecker import Kronecker, layer_vector
from bench.curvature.linalg import symmetric_eigh
from bench.harness.errors import ConfigError, require_choice, require_positive

STRUCTURES = ("diag", "kfac", "ekfac", "bdiag")
FISHER_TYPES = ("type-2", "mc", "empirical")
LIKELIHOODS = ("classification", "regression")
SUPPORTED_LAYERS = (nn.Linear, nn.Conv2d)
# Kept at their MAP values, outside the curvature (and the posterior).
NORMALISATION_LAYERS = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)
ACCUMULATE = torch.float64


@dataclass(frozen=True)
class CurvatureLayer:
    """One parameterised layer: its module path, the module, and its parameter names."""

    name: str
    module: nn.Module

    @property
    def has_bias(self) -> bool:
        """Whether the layer has a bias."""
        return self.module.bias is not None

    @property
    def parameter_names(self) -> list[str]:
        """Full names of the weight (and bias) as ``named_parameters`` gives them."""
        prefix = f"{self.name}." if self.name else ""
        return [prefix + "weight"] + ([prefix + "bias"] if self.has_bias else [])

    @property
    def n_params(self) -> int:
        """Weight and bias entries."""
        return sum(p.numel() for p in (self.module.weight, self.module.bias) if p is not None)


def curvature_layers(model: nn.Module) -> list[CurvatureLayer]:
    """The Linear and Conv2d layers of ``model`` in module order.

    Normalisation layers (:data:`NORMALISATION_LAYERS`) are skipped: their parameters are not
    part of the curvature. Any other module holding parameters, a grouped or non-zero-padded
    Conv2d, or curvature parameters out of layer order (weight then bias, layer by layer) is a
    one-line error: the flat layout of every structure is this order.
    """
    layers = []
    for name, module in model.named_modules():
        own = list(module.parameters(recurse=False))
        if not own or isinstance(module, NORMALISATION_LAYERS):
            continue
        if not isinstance(module, SUPPORTED_LAYERS):
            raise ConfigError(f"layer {name!r} ({type(module).__name__}) has parameters; the "
                              "curvature supports only Linear and Conv2d layers (and keeps "
                              "normalisation layers at their trained values)")
        if isinstance(module, nn.Conv2d) and (module.groups != 1
                                              or module.padding_mode != "zeros"):
            raise ConfigError(f"Conv2d {name!r}: only groups=1 and zero padding are supported")
        layers.append(CurvatureLayer(name, module))
    order = [n for layer in layers for n in layer.parameter_names]
    covered = set(order)
    if order != [n for n, _ in model.named_parameters() if n in covered]:
        raise ConfigError("the model's parameters are not in layer order (weight, bias per "
                          f"layer): {order[:4]}...")
    return layers


def flat_parameters(model: nn.Module) -> Tensor:
    """The curvature layers' parameters as one vector in the curvature layout
    (``parameters_to_vector`` order without the normalisation layers' parameters)."""
    layers = curvature_layers(model)
    named = dict(model.named_parameters())
    return torch.cat([named[n].detach().reshape(-1) for lay in layers
                      for n in lay.parameter_names])


def output_vectors(output: Tensor, labels: Tensor | None, likelihood: str, fisher_type: str,
                   mc_samples: int = 1, noise_std: float = 1.0,
                   generator: torch.Generator | None = None) -> Tensor:
    """Output-space vectors ``v`` ``[K, n, C]`` with ``sum_k v_k v_k^T`` the curvature of the
    negative log-likelihood with respect to the outputs ``[n, C]`` (see the module doc)."""
    output = output.detach()
    if likelihood == "classification":
        probs = torch.softmax(output, dim=-1)
        eye = torch.eye(probs.shape[-1], dtype=probs.dtype, device=probs.device)
        if fisher_type == "type-2":
            return probs.T.sqrt().unsqueeze(-1) * (eye.unsqueeze(1) - probs)
        if fisher_type == "mc":
            sampled = torch.multinomial(probs, mc_samples, replacement=True,
                                        generator=generator).T
            return (probs - eye[sampled]) / mc_samples**0.5
        return (probs - eye[labels.long()]).unsqueeze(0)
    if fisher_type == "type-2":
        eye = torch.eye(output.shape[-1], dtype=output.dtype, device=output.device)
        return eye.unsqueeze(1).expand(-1, output.shape[0], -1) / noise_std
    if fisher_type == "mc":
        noise = torch.randn((mc_samples, *output.shape), dtype=output.dtype,
                            device=output.device, generator=generator)
        return noise / (noise_std * mc_samples**0.5)
    return ((output - labels.reshape(output.shape)) / noise_std**2).unsqueeze(0)


def _layer_input(layer: CurvatureLayer, x: Tensor) -> Tensor:
    """The layer's input as ``[n, positions, fan_in (+1 for the bias)]``."""
    module = layer.module
    if isinstance(module, nn.Conv2d):
        patches = F.unfold(x, module.kernel_size, module.dilation, module.padding,
                           module.stride).transpose(1, 2)
    else:
        patches = x.reshape(x.shape[0], -1, x.shape[-1])
    if layer.has_bias:
        patches = torch.cat([patches, patches.new_ones(*patches.shape[:-1], 1)], dim=-1)
    return patches


def _layer_output_grad(layer: CurvatureLayer, grad: Tensor) -> Tensor:
    """The gradient at the layer's output as ``[n, positions, fan_out]``."""
    if isinstance(layer.module, nn.Conv2d):
        return grad.flatten(2).transpose(1, 2)
    return grad.reshape(grad.shape[0], -1, grad.shape[-1])


def _flatten_layer(matrix: Tensor, has_bias: bool) -> Tensor:
    """``[..., out, in (+1)]`` to the layer's flat parameter layout."""
    return layer_vector(matrix) if has_bias else matrix.flatten(-2)


@dataclass
class _Batch:
    """One minibatch: per layer its inputs and the gradients of each output vector."""

    inputs: list[Tensor]
    grads: list[list[Tensor]]  # [k][layer]


def _batches(model: nn.Module, layers: list[CurvatureLayer], inputs: Tensor,
             labels: Tensor | None, options: dict, batch_size: int,
             generator: torch.Generator | None) -> Iterator[_Batch]:
    """Forward and ``K`` backward passes per minibatch, with layer inputs and output grads."""
    device = next(model.parameters()).device
    params = {n: p.detach().requires_grad_(True) for n, p in model.named_parameters()}
    seen: dict[str, tuple[Tensor, Tensor]] = {}

    def record(name):
        return lambda _module, args, out: seen.__setitem__(name, (args[0], out))

    for start in range(0, len(inputs), batch_size):
        x = inputs[start:start + batch_size].to(device)
        y = None if labels is None else labels[start:start + batch_size].to(device)
        hooks = [lay.module.register_forward_hook(record(lay.name)) for lay in layers]
        try:
            with torch.enable_grad():
                output = functional_call(model, params, (x,))
        finally:
            for hook in hooks:
                hook.remove()
        outputs = [seen[lay.name][1] for lay in layers]
        vectors = output_vectors(output, y, generator=generator, **options)
        grads = []
        for k, vector in enumerate(vectors):
            layer_grads = torch.autograd.grad(output, outputs, grad_outputs=vector,
                                              retain_graph=k < len(vectors) - 1)
            grads.append([_layer_output_grad(lay, g)
                          for lay, g in zip(layers, layer_grads, strict=True)])
        layer_inputs = [_layer_input(lay, seen[lay.name][0].detach()) for lay in layers]
        seen.clear()
        yield _Batch(layer_inputs, grads)


def _per_example(g: Tensor, a: Tensor) -> Tensor:
    """Per-example gradients ``[n, out, in (+1)]`` from output grads and inputs."""
    return torch.einsum("npo,npi->noi", g, a)


def module_curvature(model: nn.Module, inputs: Tensor, labels: Tensor | None, structure: str,
                     *, likelihood: str = "classification", fisher_type: str = "type-2",
                     mc_samples: int = 1, noise_std: float = 1.0, batch_size: int = 256,
                     generator: torch.Generator | None = None,
                     max_block_size: int = 5000) -> Curvature:
    """The curvature of ``model`` over ``inputs`` (labels for ``empirical``) in ``structure``,
    over the weights (and biases) of its Linear and Conv2d layers, with the network in eval
    mode (normalisation layers at their trained values; the mode is restored afterwards).

    ``inputs`` may live on the CPU: minibatches of ``batch_size`` move to the model's device.
    ``generator`` (on that device) draws the ``mc`` labels. A ``bdiag`` layer with more than
    ``max_block_size`` parameters is a one-line error (its dense block would not fit).
    """
    require_choice("method.structure", structure, STRUCTURES)
    require_choice("method.fisher_type", fisher_type, FISHER_TYPES)
    require_choice("method.likelihood", likelihood, LIKELIHOODS)
    require_positive("method.mc_samples", mc_samples)
    if fisher_type == "empirical" and labels is None:
        raise ValueError("the empirical Fisher needs the training labels")
    layers = curvature_layers(model)
    if structure == "bdiag":
        for lay in layers:
            if lay.n_params > max_block_size:
                gib = lay.n_params**2 * 8 / 2**30
                raise ConfigError(
                    f"method.structure=bdiag: layer {lay.name!r} has {lay.n_params} parameters "
                    f"(a {gib:.1f} GiB dense block); B-Diag is only feasible for layers of at "
                    f"most {max_block_size} parameters")
    options = {"likelihood": likelihood, "fisher_type": fisher_type,
               "mc_samples": mc_samples, "noise_std": noise_std}
    training = model.training
    model.eval()
    try:
        return _structured_curvature(
            structure, layers,
            lambda: _batches(model, layers, inputs, labels, options, batch_size, generator))
    finally:
        model.train(training)


def _structured_curvature(structure: str, layers: list[CurvatureLayer],
                          passes: Callable[[], Iterator[_Batch]]) -> Curvature:
    """Accumulate ``structure`` from fresh passes over the data (two for EKFAC)."""
    if structure == "diag":
        return Diagonal(torch.cat([_flatten_layer(d, lay.has_bias) for lay, d in
                                   zip(layers, _accumulate_diagonal(passes(), len(layers)),
                                       strict=True)]))
    if structure == "bdiag":
        blocks = _accumulate_blocks(passes(), layers)
        index, start = [], 0
        for block in blocks:
            index.append(torch.arange(start, start + block.shape[0], device=block.device))
            start += block.shape[0]
        return BlockDiagonal(tuple(index), tuple(blocks), start)
    biases = tuple(lay.has_bias for lay in layers)
    kfac = Kronecker(tuple(_accumulate_kronecker(passes(), len(layers))), biases)
    if structure == "kfac":
        return kfac
    bases = [(symmetric_eigh(a)[1], symmetric_eigh(g)[1])
             for a, g in kfac.factors]
    eigenvalues = _accumulate_eigenvalues(passes(), bases)
    return EigenKronecker(tuple((u_a, u_g, s) for (u_a, u_g), s in
                                zip(bases, eigenvalues, strict=True)), biases)


def _accumulate_diagonal(batches: Iterator[_Batch], n_layers: int) -> list[Tensor]:
    """Per layer ``sum_nk grad_nk^2`` as ``[out, in (+1)]``."""
    total: list[Tensor | int] = [0] * n_layers
    for batch in batches:
        for grads in batch.grads:
            for i, (a, g) in enumerate(zip(batch.inputs, grads, strict=True)):
                if a.shape[1] == 1:  # no weight sharing: (g a^T)^2 = g^2 a^2^T
                    square = torch.einsum("no,ni->oi", g[:, 0] ** 2, a[:, 0] ** 2)
                else:
                    square = (_per_example(g, a) ** 2).sum(0)
                total[i] = total[i] + square.to(ACCUMULATE)
    return total


def _accumulate_kronecker(batches: Iterator[_Batch], n_layers: int
                          ) -> list[tuple[Tensor, Tensor]]:
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


def _accumulate_eigenvalues(batches: Iterator[_Batch], bases: list[tuple[Tensor, Tensor]]
                            ) -> list[Tensor]:
    """Per layer ``sum_nk (U_G^T grad_nk U_Q)^2`` ``[out, in (+ 1)]`` (EKFAC's eigenvalues)."""
    total: list[Tensor | int] = [0] * len(bases)
    for batch in batches:
        rotated_inputs = [a @ u_a.to(a.dtype) for a, (u_a, _) in
                          zip(batch.inputs, bases, strict=True)]
        for grads in batch.grads:
            for i, (a, g) in enumerate(zip(rotated_inputs, grads, strict=True)):
                rotated = _per_example(g @ bases[i][1].to(g.dtype), a)
                total[i] = total[i] + (rotated**2).sum(0).to(ACCUMULATE)
    return total


def _accumulate_blocks(batches: Iterator[_Batch], layers: list[CurvatureLayer]) -> list[Tensor]:
    """Per layer the dense ``sum_nk grad_nk grad_nk^T`` in the layer's parameter layout."""
    total: list[Tensor | int] = [0] * len(layers)
    for batch in batches:
        for grads in batch.grads:
            for i, (a, g) in enumerate(zip(batch.inputs, grads, strict=True)):
                flat = _flatten_layer(_per_example(g, a), layers[i].has_bias).to(ACCUMULATE)
                total[i] = total[i] + flat.T @ flat
    return total
