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
parameters left out, checked by :func:`curvature_layers`). :class:`ModuleBackend` serves these
sums as a :class:`bench.curvature.base.GGNBackend`, so every structure is built from it the
way it is built from the other backends (:mod:`bench.curvature.structures`); the structures
of ``method.structure`` here (:data:`STRUCTURES`):

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
serves each structure (two for EKFAC; a ``dense`` curvature over all layers is also served;
curvlinops 3.0.1 has no exact diagonal and no per-layer dense blocks), labels are drawn from
an explicit generator, and the Gaussian likelihood of the regression toy goes through the same
code. Accumulators are float64 (:mod:`bench.curvature.gradient_sums`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from bench.curvature.base import Curvature
from bench.curvature.gradient_sums import (
    LayerBatch,
    eigenbasis_squared_sums,
    flatten_layer,
    kronecker_sums,
    layer_outer_product_sums,
    outer_product_sum,
    squared_gradient_sums,
)
from bench.curvature.structures import structure_class, structures_named
from bench.harness.errors import ConfigError, require_choice, require_positive

# The structures of ``method.structure`` for an nn.Module's curvature.
STRUCTURES = structures_named("diag", "kfac", "ekfac", "bdiag")
SUPPORTED_LAYERS = (nn.Linear, nn.Conv2d)
# Kept at their MAP values, outside the curvature (and the posterior).
NORMALISATION_LAYERS = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)


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


@dataclass(frozen=True)
class OutputCurvature:
    """One likelihood's curvature in output space, of one Fisher type: output vectors ``v``
    ``[K, n, C]`` with ``sum_k v_k v_k^T`` the curvature of the negative log-likelihood with
    respect to the outputs ``[n, C]`` (see the module doc). ``mc_samples`` labels per input
    for the Monte Carlo Fisher, ``noise_std`` the Gaussian likelihood's noise sd."""

    mc_samples: int = 1
    noise_std: float = 1.0
    # Whether the vectors read the training labels (the empirical Fisher).
    needs_labels: ClassVar[bool] = False

    def vectors(self, output: Tensor, labels: Tensor | None,
                generator: torch.Generator | None) -> Tensor:
        """The output vectors at ``output`` (``labels`` for the empirical Fisher, ``generator``
        for the sampled one)."""
        raise NotImplementedError


class SoftmaxGGN(OutputCurvature):
    """Softmax cross-entropy, exact GGN (type-2): ``v_c = sqrt(p_c) (e_c - p)``."""

    def vectors(self, output: Tensor, labels: Tensor | None,
                generator: torch.Generator | None) -> Tensor:
        probs = torch.softmax(output, dim=-1)
        eye = torch.eye(probs.shape[-1], dtype=probs.dtype, device=probs.device)
        return probs.T.sqrt().unsqueeze(-1) * (eye.unsqueeze(1) - probs)


class SoftmaxSampledFisher(OutputCurvature):
    """Softmax cross-entropy, Fisher with ``mc_samples`` labels drawn from the model:
    ``v_s = (p - e_ys) / sqrt(S)``."""

    def vectors(self, output: Tensor, labels: Tensor | None,
                generator: torch.Generator | None) -> Tensor:
        probs = torch.softmax(output, dim=-1)
        eye = torch.eye(probs.shape[-1], dtype=probs.dtype, device=probs.device)
        sampled = torch.multinomial(probs, self.mc_samples, replacement=True,
                                    generator=generator).T
        return (probs - eye[sampled]) / self.mc_samples**0.5


class SoftmaxEmpiricalFisher(OutputCurvature):
    """Softmax cross-entropy, the training labels' gradient outer products."""

    needs_labels = True

    def vectors(self, output: Tensor, labels: Tensor | None,
                generator: torch.Generator | None) -> Tensor:
        probs = torch.softmax(output, dim=-1)
        eye = torch.eye(probs.shape[-1], dtype=probs.dtype, device=probs.device)
        return (probs - eye[labels.long()]).unsqueeze(0)


class GaussianGGN(OutputCurvature):
    """Gaussian likelihood (noise sd sigma), exact GGN: ``sigma^-2 sum J^T J``."""

    def vectors(self, output: Tensor, labels: Tensor | None,
                generator: torch.Generator | None) -> Tensor:
        eye = torch.eye(output.shape[-1], dtype=output.dtype, device=output.device)
        return eye.unsqueeze(1).expand(-1, output.shape[0], -1) / self.noise_std


class GaussianSampledFisher(OutputCurvature):
    """Gaussian likelihood, Fisher with ``y ~ N(f, sigma^2)`` drawn ``mc_samples`` times."""

    def vectors(self, output: Tensor, labels: Tensor | None,
                generator: torch.Generator | None) -> Tensor:
        noise = torch.randn((self.mc_samples, *output.shape), dtype=output.dtype,
                            device=output.device, generator=generator)
        return noise / (self.noise_std * self.mc_samples**0.5)


class GaussianEmpiricalFisher(OutputCurvature):
    """Gaussian likelihood, the residuals' gradient outer products."""

    needs_labels = True

    def vectors(self, output: Tensor, labels: Tensor | None,
                generator: torch.Generator | None) -> Tensor:
        return ((output - labels.reshape(output.shape)) / self.noise_std**2).unsqueeze(0)


# method.likelihood -> method.fisher_type -> its output curvature.
OUTPUT_CURVATURES: dict[str, dict[str, type[OutputCurvature]]] = {
    "classification": {"type-2": SoftmaxGGN, "mc": SoftmaxSampledFisher,
                       "empirical": SoftmaxEmpiricalFisher},
    "regression": {"type-2": GaussianGGN, "mc": GaussianSampledFisher,
                   "empirical": GaussianEmpiricalFisher},
}
FISHER_TYPES = tuple(OUTPUT_CURVATURES["classification"])
LIKELIHOODS = tuple(OUTPUT_CURVATURES)


def output_curvature(likelihood: str, fisher_type: str, mc_samples: int = 1,
                     noise_std: float = 1.0) -> OutputCurvature:
    """The output curvature of ``likelihood`` and ``fisher_type`` (:data:`OUTPUT_CURVATURES`;
    a one-line ConfigError listing the choices for a name not there)."""
    by_type = OUTPUT_CURVATURES[require_choice("method.likelihood", likelihood,
                                               OUTPUT_CURVATURES)]
    chosen = by_type[require_choice("method.fisher_type", fisher_type, by_type)]
    return chosen(require_positive("method.mc_samples", mc_samples), noise_std)


def output_vectors(output: Tensor, labels: Tensor | None, likelihood: str, fisher_type: str,
                   mc_samples: int = 1, noise_std: float = 1.0,
                   generator: torch.Generator | None = None) -> Tensor:
    """Output-space vectors ``v`` ``[K, n, C]`` of the output curvature named by
    ``likelihood`` and ``fisher_type`` (:func:`output_curvature`)."""
    curvature = output_curvature(likelihood, fisher_type, mc_samples, noise_std)
    return curvature.vectors(output.detach(), labels, generator)


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


@dataclass
class ModuleBackend:
    """The :class:`bench.curvature.base.GGNBackend` of an ``nn.Module``: the curvature of
    ``likelihood`` (``fisher_type``, ``mc_samples``, ``noise_std``; see the module doc) over
    the weights (and biases) of its Linear and Conv2d layers, accumulated from per-example
    gradients in minibatches of ``batch_size``. A method's ``x`` are the model's inputs
    (``labels`` their targets, for ``empirical``); ``x`` may live on the CPU, minibatches move
    to the model's device. ``generator`` (on that device) draws the ``mc`` labels, fresh
    ones in every pass. The network is in eval mode during a pass (normalisation layers at
    their trained values; the mode is restored afterwards). Per-point ``weights`` scale each
    point's output vectors by ``sqrt(w)``. A layer block (or a dense matrix) of more than
    ``max_block_size`` parameters is a one-line error."""

    model: nn.Module
    labels: Tensor | None = None
    likelihood: str = "classification"
    fisher_type: str = "type-2"
    mc_samples: int = 1
    noise_std: float = 1.0
    batch_size: int = 256
    generator: torch.Generator | None = None
    max_block_size: int = 5000
    layers: list[CurvatureLayer] = field(init=False)
    output_curvature: OutputCurvature = field(init=False)

    def __post_init__(self) -> None:
        self.output_curvature = output_curvature(self.likelihood, self.fisher_type,
                                                 self.mc_samples, self.noise_std)
        if self.output_curvature.needs_labels and self.labels is None:
            raise ValueError(f"the {self.fisher_type} Fisher needs the training labels")
        self.layers = curvature_layers(self.model)

    @property
    def biases(self) -> tuple[bool, ...]:
        """Per curvature layer whether it has a bias."""
        return tuple(lay.has_bias for lay in self.layers)

    def ggn_diagonal(self, x: Tensor, weights: Tensor | None) -> Tensor:
        """The summed squared per-example gradients."""
        with self._evaluating():
            squares = squared_gradient_sums(self._batches(x, weights), len(self.layers))
        return torch.cat([flatten_layer(d, bias) for d, bias in
                          zip(squares, self.biases, strict=True)])

    def layer_blocks(self, x: Tensor, weights: Tensor | None) -> list[Tensor]:
        """The exact dense block of each layer."""
        for lay in self.layers:
            if lay.n_params > self.max_block_size:
                gib = lay.n_params**2 * 8 / 2**30
                raise ConfigError(
                    f"method.structure=bdiag: layer {lay.name!r} has {lay.n_params} parameters "
                    f"(a {gib:.1f} GiB dense block); B-Diag is only feasible for layers of at "
                    f"most {self.max_block_size} parameters")
        with self._evaluating():
            return layer_outer_product_sums(self._batches(x, weights), list(self.biases))

    def ggn_matrix(self, x: Tensor, weights: Tensor | None) -> Tensor:
        """The dense curvature over every layer's parameters."""
        n_params = sum(lay.n_params for lay in self.layers)
        if n_params > self.max_block_size:
            raise ConfigError(f"method.structure=dense: the network has {n_params} curvature "
                              f"parameters; a dense curvature is only feasible for at most "
                              f"{self.max_block_size}")
        with self._evaluating():
            return outer_product_sum(self._batches(x, weights), list(self.biases))

    def kronecker_factors(self, x: Tensor, weights: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        """K-FAC with curvlinops' KFAC-expand conventions (module doc)."""
        with self._evaluating():
            return kronecker_sums(self._batches(x, weights), len(self.layers))

    def kronecker_eigenvalues(self, x: Tensor, weights: Tensor | None,
                              bases: list[tuple[Tensor, Tensor]]) -> list[Tensor]:
        """EKFAC's eigenvalues from a pass of rotated per-example gradients."""
        with self._evaluating():
            return eigenbasis_squared_sums(self._batches(x, weights), bases)

    @contextmanager
    def _evaluating(self) -> Iterator[None]:
        training = self.model.training
        self.model.eval()
        try:
            yield
        finally:
            self.model.train(training)

    def _batches(self, inputs: Tensor, weights: Tensor | None) -> Iterator[LayerBatch]:
        """Forward and ``K`` backward passes per minibatch, with layer inputs and output
        grads."""
        model, layers = self.model, self.layers
        device = next(model.parameters()).device
        params = {n: p.detach().requires_grad_(True) for n, p in model.named_parameters()}
        seen: dict[str, tuple[Tensor, Tensor]] = {}

        def record(name):
            return lambda _module, args, out: seen.__setitem__(name, (args[0], out))

        for start in range(0, len(inputs), self.batch_size):
            window = slice(start, start + self.batch_size)
            x = inputs[window].to(device)
            y = None if self.labels is None else self.labels[window].to(device)
            hooks = [lay.module.register_forward_hook(record(lay.name)) for lay in layers]
            try:
                with torch.enable_grad():
                    output = functional_call(model, params, (x,))
            finally:
                for hook in hooks:
                    hook.remove()
            outputs = [seen[lay.name][1] for lay in layers]
            vectors = self.output_curvature.vectors(output.detach(), y, self.generator)
            if weights is not None:
                vectors = vectors * weights[window].to(device).sqrt().unsqueeze(-1)
            grads = []
            for k, vector in enumerate(vectors):
                layer_grads = torch.autograd.grad(output, outputs, grad_outputs=vector,
                                                  retain_graph=k < len(vectors) - 1)
                grads.append([_layer_output_grad(lay, g)
                              for lay, g in zip(layers, layer_grads, strict=True)])
            layer_inputs = [_layer_input(lay, seen[lay.name][0].detach()) for lay in layers]
            seen.clear()
            yield LayerBatch(layer_inputs, grads)


def module_curvature(model: nn.Module, inputs: Tensor, labels: Tensor | None, structure: str,
                     *, likelihood: str = "classification", fisher_type: str = "type-2",
                     mc_samples: int = 1, noise_std: float = 1.0, batch_size: int = 256,
                     generator: torch.Generator | None = None,
                     max_block_size: int = 5000) -> Curvature:
    """The curvature of ``model`` over ``inputs`` (labels for ``empirical``) in the structure
    named ``structure`` (one of :data:`STRUCTURES`), built from a :class:`ModuleBackend` with
    the other arguments (see there)."""
    chosen = structure_class(structure, STRUCTURES)
    backend = ModuleBackend(model, labels, likelihood, fisher_type, mc_samples, noise_std,
                            batch_size, generator, max_block_size)
    return chosen.from_backend(backend, inputs, None)
