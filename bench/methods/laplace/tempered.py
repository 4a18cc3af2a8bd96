"""The tempered Laplace posterior of Generalized Laplace (Chen et al.) with exact samplers.

``p_T(theta | D) ~ p(D | theta)^T p(theta)`` around the trained network theta_MAP has
precision ``T * F + delta * I`` (T multiplies the likelihood: T > 1 is cold; ``delta`` the
prior precision; ``F`` the curvature of :mod:`bench.curvature.module_curvature` in one of the
structures ``diag | kfac | ekfac | bdiag``). The posterior is over every Linear and Conv2d
weight (and bias where present); normalisation layers (BatchNorm's affine parameters and
running statistics) stay at their MAP values, and every prediction is in eval mode. Draws are
exact per structure (reproduction notes section 2): ``z / sqrt(T d + delta)`` for Diag,
``U_G [Z / sqrt(T S + delta)] U_Q^T`` per layer for K-FAC (``S = lambda_G lambda_Q^T``) and
EKFAC, ``L^-T z`` with ``L L^T = T F_l + delta I`` for B-Diag. The predictive is NN
sampling, the mean of ``softmax(f(x; theta_s))``. With ``accumulation=paper-like`` the
precision is the one the DLR curvature library would have built from the same data
(:class:`bench.curvature.kfac_scaling.LibraryAccumulation`: rescaled Diag / EKFAC, K-FAC
factors summed over minibatch means and damped per factor), still sampled exactly.

The curvature is computed once per fit and the standard-normal draws ``z`` once per fit (from
the seed); :meth:`TemperedLaplace.predict_tempered` reuses both for every temperature, so a
sweep over T is smooth in T (notes section 4). The network is evaluated with
``torch.func.functional_call`` on views of the draws (all draws of an input chunk under
``vmap`` on CUDA), never copying parameters into the module.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from bench.curvature.base import Curvature
from bench.curvature.kfac_scaling import (
    ACCUMULATIONS,
    LibraryAccumulation,
    PrecisionAt,
    layer_frobenius_norm,
    make_accumulation,
    precision_eigenvalues,
    tempered,
    weight_sharing_positions,
)
from bench.curvature.module_curvature import (
    FISHER_TYPES,
    LIKELIHOODS,
    STRUCTURES,
    curvature_layers,
    flat_parameters,
    module_curvature,
)
from bench.harness.errors import ConfigError, require_choice, require_positive
from bench.harness.rng import make_generator
from bench.harness.timing import Stopwatch
from bench.methods.settings import PredictionSettings, settings_node
from bench.predictive.categorical import Categorical
from bench.predictive.densities import Gaussian


def precision_function(posterior: Curvature | PrecisionAt) -> PrecisionAt:
    """``(temperature, prior_precision) -> precision``: a curvature ``F`` is tempered as
    ``T F + delta I``; a function (an accumulation's :meth:`precision_at`) is used as it is."""
    return tempered(posterior) if isinstance(posterior, Curvature) else posterior


def _draws_or_none(posterior: Curvature, z: Tensor) -> Tensor | None:
    """``posterior.inverse_sqrt(z)``, or None when a factorisation fails or is not finite."""
    try:
        draws = posterior.inverse_sqrt(z)
    except torch.linalg.LinAlgError:
        return None
    return draws if bool(torch.isfinite(draws).all()) else None


def smallest_working_prior_precision(curvature: Curvature | PrecisionAt, temperature: float,
                                     prior_precision: float, steps: int = 8) -> float | None:
    """The smallest ``delta >= prior_precision`` (to a factor ``10^(1/2^steps)``) for which
    the precision at ``temperature`` (``T F + delta I`` of a curvature, or a precision
    function's) factorises: powers of ten up, then bisection on log delta. None if nothing up
    to ``prior_precision * 1e30`` works."""
    precision = precision_function(curvature)
    start = precision(temperature, prior_precision)
    probe = start.diagonal().new_zeros(1, start.n_params)

    def works(delta: float) -> bool:
        return _draws_or_none(precision(temperature, delta), probe) is not None

    if works(prior_precision):
        return prior_precision
    low = math.log10(prior_precision)
    high = next((low + k for k in range(1, 31) if works(10 ** (low + k))), None)
    if high is None:
        return None
    low = high - 1
    for _ in range(steps):
        middle = (low + high) / 2
        low, high = (low, middle) if works(10**middle) else (middle, high)
    return 10**high


def posterior_draws(curvature: Curvature | PrecisionAt, temperature: float,
                    prior_precision: float, z: Tensor) -> Tensor:
    """Draws ``[S, q]`` from ``N(0, P^-1)`` from standard normal ``z`` ``[S, q]``, with ``P``
    the precision at ``temperature`` and ``prior_precision`` (``T F + delta I`` of a
    curvature ``F``, or a precision function's); a failed factorisation is a one-line
    ConfigError naming ``method.prior_precision`` and the smallest working value."""
    draws = _draws_or_none(precision_function(curvature)(temperature, prior_precision), z)
    if draws is None:
        smallest = smallest_working_prior_precision(curvature, temperature, prior_precision)
        hint = (f"the smallest working value is about {smallest:.3g}" if smallest is not None
                else "no value up to 1e30 times larger works")
        raise ConfigError(f"method.prior_precision={prior_precision!r}: factorising T*F + "
                          f"delta*I failed at temperature {temperature:g}; {hint}")
    return draws


def parameter_dict(model: nn.Module, thetas: Tensor) -> dict[str, Tensor]:
    """Flat parameter vectors ``[S, q]`` (curvature layout) as named ``[S, *shape]`` views of
    the curvature layers' parameters; the others (normalisation layers) are not in it, so
    ``functional_call`` keeps them at the module's own values."""
    named = dict(model.named_parameters())
    out, start = {}, 0
    for name in (n for layer in curvature_layers(model) for n in layer.parameter_names):
        shape = named[name].shape
        out[name] = thetas[:, start:start + shape.numel()].reshape(-1, *shape)
        start += shape.numel()
    if start != thetas.shape[-1]:
        raise ValueError(f"{thetas.shape[-1]} parameters per draw for {start} curvature "
                         "parameters")
    return out


def sampled_outputs(model: nn.Module, thetas: Tensor, x: Tensor, batch_size: int = 256,
                    reduce=None, vectorise: bool | None = None) -> Tensor:
    """``f(x; theta_s)`` ``[S, n, C]`` for parameter draws ``thetas`` ``[S, q]``, or
    ``reduce`` of each input chunk's ``[S, chunk, C]`` (concatenated along the inputs).

    Inputs go in chunks of ``batch_size`` to the draws' device; the result is on ``x``'s
    device. ``vectorise`` (default: on CUDA) evaluates all draws of a chunk in one call,
    ``vmap`` over ``functional_call``; otherwise one ``functional_call`` per draw on views of
    ``thetas`` (on the CPU ``vmap`` turns convolutions into slower grouped ones: measured 1.5x
    slower on LeNet-5).
    """
    params = parameter_dict(model, thetas)
    vectorise = thetas.device.type == "cuda" if vectorise is None else vectorise
    batched = vmap(lambda p, xb: functional_call(model, p, (xb,)), in_dims=(0, None))
    out = []
    with torch.no_grad():
        for start in range(0, len(x), batch_size):
            xb = x[start:start + batch_size].to(device=thetas.device, dtype=thetas.dtype)
            if vectorise:
                chunk = batched(params, xb)
            else:
                chunk = torch.stack([functional_call(model, {k: v[s] for k, v in params.items()},
                                                     (xb,)) for s in range(len(thetas))])
            out.append((chunk if reduce is None else reduce(chunk)).to(x.device))
    return torch.cat(out, dim=0 if reduce is not None else 1)


def sampled_probabilities(model: nn.Module, thetas: Tensor, x: Tensor, batch_size: int = 256,
                          vectorise: bool | None = None) -> Tensor:
    """``mean_s softmax(f(x; theta_s))`` ``[n, C]`` (see :func:`sampled_outputs`)."""
    return sampled_outputs(model, thetas, x, batch_size,
                           reduce=lambda logits: torch.softmax(logits, dim=-1).mean(0),
                           vectorise=vectorise)


def sampled_categorical(model: nn.Module, thetas: Tensor, x: Tensor, batch_size: int,
                        noise_std: float) -> Categorical:
    """Classification: the class probabilities averaged over the draws."""
    return Categorical(sampled_probabilities(model, thetas, x, batch_size))


def sampled_gaussian(model: nn.Module, thetas: Tensor, x: Tensor, batch_size: int,
                     noise_std: float) -> Gaussian:
    """Regression (one output): the draws' mean and variance plus ``noise_std^2``."""
    outputs = sampled_outputs(model, thetas, x, batch_size)
    if outputs.shape[-1] != 1:
        raise ValueError("the regression predictive supports one output")
    values = outputs[..., 0]
    return Gaussian(values.mean(0), values.var(0) + noise_std**2)


# The NN-sampling predictive of each likelihood (``method.likelihood``).
SAMPLED_PREDICTIVES: dict[str, Callable[..., Categorical | Gaussian]] = {
    "classification": sampled_categorical, "regression": sampled_gaussian}


@dataclass
class TemperedLaplace:
    """Tempered all-weights Laplace for a classifier (or the Gaussian regression toy) with an
    NN-sampling predictive: ``fit(data, seed, base=network)`` then ``predict(x)`` at
    ``temperature`` or :meth:`predict_tempered` at many temperatures.

    ``data`` has ``train_inputs`` and ``train_labels`` tensors. ``structure``: diag | kfac |
    ekfac | bdiag; ``fisher_type``: type-2 (exact GGN) | mc (``mc_samples`` labels per input)
    | empirical; ``likelihood``: classification | regression (``noise_std``). ``batch_size``
    is the minibatch of the curvature pass, ``prediction.batch_size`` the input chunk of the
    predictive. ``accumulation`` (:data:`bench.curvature.kfac_scaling.ACCUMULATIONS`): exact
    (precision ``T F + delta I``) | paper-like (the DLR curvature library's sums over
    ``library_label_samples`` labels per minibatch of ``library_batch_size``, K-FAC damped per
    factor; reproduction notes 7.6). Both accumulations' last-layer norms are in the
    diagnostics whichever one the draws use.
    """

    name: str = "tempered_laplace"
    structure: str = "diag"
    fisher_type: str = "mc"
    mc_samples: int = 30
    likelihood: str = "classification"
    noise_std: float = 1.0
    prior_precision: float = 1.0
    temperature: float = 1.0
    n_samples: int = 50
    batch_size: int = 128
    prediction: PredictionSettings = PredictionSettings(batch_size=1000)
    max_block_size: int = 5000
    accumulation: str = "exact"
    library_batch_size: int = 32
    library_label_samples: int = 30
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = True
    curvature: Curvature | None = field(default=None, init=False, repr=False)
    sampled_predictive: Callable[..., Categorical | Gaussian] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.prediction = settings_node(PredictionSettings, self.prediction)
        require_choice("method.structure", self.structure, STRUCTURES)
        require_choice("method.fisher_type", self.fisher_type, FISHER_TYPES)
        self.sampled_predictive = SAMPLED_PREDICTIVES[
            require_choice("method.likelihood", self.likelihood, LIKELIHOODS)]
        require_choice("method.accumulation", self.accumulation, ACCUMULATIONS)
        require_positive("method.temperature", self.temperature)
        require_positive("method.prior_precision", self.prior_precision)
        for key in ("mc_samples", "n_samples", "batch_size",
                    "library_batch_size", "library_label_samples"):
            require_positive(f"method.{key}", getattr(self, key))

    def fit(self, data: Any, seed: int, base: nn.Module | None = None) -> dict[str, Any]:
        """The curvature of ``base`` over ``data``'s training set, its precision function under
        ``accumulation`` and ``n_samples`` standard normal draws from ``seed``; returns the
        diagnostics (the last-layer norms of both accumulations among them)."""
        if not isinstance(base, nn.Module):
            raise ValueError("TemperedLaplace.fit needs the trained network (base=nn.Module)")
        self.model = copy.deepcopy(base).to(self.device).eval()
        layers = curvature_layers(self.model)
        generator = make_generator(seed, self.device)
        watch = Stopwatch()
        self.curvature = module_curvature(
            self.model, data.train_inputs, data.train_labels, self.structure,
            likelihood=self.likelihood, fisher_type=self.fisher_type,
            mc_samples=self.mc_samples, noise_std=self.noise_std, batch_size=self.batch_size,
            generator=generator, max_block_size=self.max_block_size)
        n_train = len(data.train_inputs)
        library = {"n_data": n_train, "batch_size": self.library_batch_size,
                   "label_samples": self.library_label_samples,
                   "positions": weight_sharing_positions(
                       self.model, data.train_inputs[:1].to(self.device))}
        chosen = make_accumulation(self.accumulation, **library)
        self._precision = chosen.precision_at(self.curvature)
        curvature_s = watch.elapsed()
        self.theta_map = flat_parameters(self.model)
        self.z = torch.randn(self.n_samples, self.curvature.n_params, generator=generator,
                             dtype=self.curvature.diagonal().dtype, device=self.device)
        posterior_draws(self._precision, self.temperature, self.prior_precision, self.z[:1])
        sizes = [layer.n_params for layer in layers]
        paper_like = LibraryAccumulation(**library)
        return {"structure": self.structure, "fisher_type": self.fisher_type,
                "accumulation": self.accumulation,
                "prior_precision": self.prior_precision, "temperature": self.temperature,
                "n_params": self.curvature.n_params, "n_train": n_train,
                "curvature_s": curvature_s, "library_updates": paper_like.updates,
                "last_layer_frobenius_norm": layer_frobenius_norm(self.curvature, -1, sizes),
                "paper_like_last_layer_frobenius_norm": paper_like.layer_norm(
                    self.curvature, -1, sizes)}

    def parameter_draws(self, temperature: float) -> Tensor:
        """``theta_MAP + draws`` ``[S, q]`` at ``temperature`` from the fixed ``z``."""
        require_positive("method.temperature", temperature)
        draws = posterior_draws(self._precision, temperature, self.prior_precision, self.z)
        return self.theta_map + draws.to(self.theta_map.dtype)

    def prior_dominated_share(self, temperature: float) -> float:
        """Share of the posterior precision's eigen-directions at ``temperature`` in which the
        likelihood's part is below the prior's (eigenvalue below ``2 delta``): the directions
        whose draws keep about the prior's spread ``1 / sqrt(delta)``."""
        require_positive("method.temperature", temperature)
        eigenvalues = precision_eigenvalues(self._precision(temperature, self.prior_precision))
        return float((eigenvalues < 2 * self.prior_precision).double().mean())

    def predict_tempered(self, x: Tensor, temperatures: Iterable[float]
                         ) -> dict[float, Categorical | Gaussian]:
        """The NN-sampling predictive at each temperature, all from the same draws ``z``."""
        temperatures = [require_positive("method.temperature", t) for t in temperatures]
        return {t: self._predictive(x, self.parameter_draws(t)) for t in temperatures}

    def _predictive(self, x: Tensor, thetas: Tensor) -> Categorical | Gaussian:
        return self.sampled_predictive(self.model, thetas, x, self.prediction.batch_size,
                                       self.noise_std)

    def function_samples(self, x: Tensor, temperature: float) -> Tensor:
        """Network outputs ``[S, n, C]`` at the posterior draws of ``temperature``."""
        return sampled_outputs(self.model, self.parameter_draws(temperature), x,
                               self.prediction.batch_size)

    def predict(self, x: Tensor) -> Categorical | Gaussian:
        """The NN-sampling predictive at ``temperature``: class probabilities averaged over
        the draws (classification), or a Gaussian with the draws' mean and variance plus
        ``noise_std^2`` (regression)."""
        return self.predict_tempered(x, [self.temperature])[self.temperature]
