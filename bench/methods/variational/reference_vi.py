"""A reference Gaussian VI over a single-output network's flat parameters, built on pyro: the
oracle that every variational fit of the GGN thesis (VOGGN, LGVA, OGGN, Laplace-GGN) is
compared with (issue 42).

The model is the thesis's, written with pyro's distributions: ``theta ~ N(0, delta^-1 I)``
over :class:`~bench.models.mlp.MLPShape`'s flat vector, ``f = network.forward_1d(theta, x)``
(the project's forward, vectorised over draws with ``torch.func.vmap``), and
``y ~ N(f, sigma^2)`` or ``Bernoulli(logits=f)``. The fit is pyro's reparameterisation-gradient
SVI (``Trace_ELBO`` with ``num_particles`` vectorised draws per step) with an automatic guide:

* ``diagonal``: ``AutoDiagonalNormal`` (mean field);
* ``low_rank``: ``AutoLowRankMultivariateNormal`` (rank ``rank`` plus a diagonal);
* ``full_rank``: ``AutoMultivariateNormal`` (a full Cholesky factor; small networks);

optimised by pyro's ``ClippedAdam`` with the learning rate decayed geometrically from ``lr`` to
``final_lr`` over the ``steps``. Each guide is started at several means: the given
initialisation (``init``), the MAP found from it by SVI with ``AutoDelta`` (``map``, when
``map_steps > 0``), and any mean the caller passes (e.g. a narrower network's fit embedded in
the wide one). Every fitted q is then scored by the one ELBO definition,
:func:`bench.metrics.elbo.gaussian_elbo`, with ``elbo_samples`` draws; the best is the oracle.

It shares no code with the natural-gradient update it checks: no pseudo-data, no Jacobian, no
GGN, not the project's likelihood objects (only their ``noise_variance``).

Randomness: pyro draws from torch's global RNG and keeps its parameters in a global store.
Every pyro call here runs inside :func:`isolated_pyro`, which saves the global RNG states
(torch's CPU generator and the initialised CUDA devices', numpy's, Python's), calls
``pyro.set_rng_seed`` with a seed derived from the caller's, runs in a fresh parameter-store
scope, and restores all of it on exit: no global seeding is left behind.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import (
    AutoDelta,
    AutoDiagonalNormal,
    AutoLowRankMultivariateNormal,
    AutoMultivariateNormal,
)
from pyro.infer.autoguide.initialization import init_to_value
from pyro.optim import ClippedAdam
from torch import Tensor
from torch.func import vmap

from bench.harness.errors import ConfigError, require_choice, require_positive
from bench.harness.rng import derived_seed, make_generator
from bench.harness.timing import Stopwatch
from bench.methods.variational.covariance_gaussian import CovarianceGaussian
from bench.metrics.elbo import ElboEstimate, gaussian_elbo
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood, Likelihood
from bench.models.mlp import MLPShape

GUIDES = {"diagonal": AutoDiagonalNormal, "low_rank": AutoLowRankMultivariateNormal,
          "full_rank": AutoMultivariateNormal}
SITE = "theta"
# derived_seed([seed, stream, ...]) streams: the MAP's SVI, each guide's SVI, each ELBO score.
MAP_STREAM, GUIDE_STREAM, SCORE_STREAM = 1, 2, 3
# The share of the last steps whose mean pyro loss is reported (a smoothed final -ELBO).
FINAL_LOSS_SHARE = 0.1


@dataclass(frozen=True)
class ReferenceVISettings:
    """The SVI's settings (module docstring). ``rank``: the low-rank guide's rank (None:
    pyro's ``round(sqrt(P))``); ``init_scale``: the guides' initial standard deviation."""

    KEY: ClassVar[str] = "reference_vi"
    guides: tuple[str, ...] = ("diagonal", "low_rank", "full_rank")
    steps: int = 3000
    num_particles: int = 32
    lr: float = 0.01
    final_lr: float = 0.0005
    init_scale: float = 0.01
    rank: int | None = None
    map_steps: int = 3000
    map_lr: float = 0.01
    elbo_samples: int = 1000

    def __post_init__(self) -> None:
        object.__setattr__(self, "guides", tuple(self.guides))
        if not self.guides:
            raise ConfigError("reference_vi.guides is empty; choose from: "
                              + ", ".join(GUIDES))
        for name in self.guides:
            require_choice("reference_vi.guides", name, GUIDES)
        for key in ("steps", "num_particles", "lr", "final_lr", "init_scale", "map_lr",
                    "elbo_samples"):
            require_positive(f"reference_vi.{key}", getattr(self, key))
        if self.final_lr > self.lr:
            raise ConfigError(f"reference_vi.final_lr={self.final_lr!r} is not valid; the "
                              f"learning rate decays, so it must be at most lr={self.lr!r}")
        if self.rank is not None:
            require_positive("reference_vi.rank", self.rank)
        if isinstance(self.map_steps, bool) or not isinstance(self.map_steps, int) \
                or self.map_steps < 0:
            raise ConfigError(f"reference_vi.map_steps={self.map_steps!r} is not valid; it "
                              "must be a non-negative integer (0: no MAP start)")


@dataclass(frozen=True)
class ReferenceFit:
    """One guide fitted from one start: the q, its ELBO by the project's definition, pyro's
    mean loss over the last :data:`FINAL_LOSS_SHARE` of the steps (an estimate of -ELBO)
    and the seconds the SVI took."""

    start: str
    guide: str
    q: CovarianceGaussian
    elbo: ElboEstimate
    final_loss: float
    seconds: float


@dataclass
class ReferenceVIResult:
    """Every fit, best ELBO first, and the MAP the ``map`` start used (None without one)."""

    fits: list[ReferenceFit] = field(default_factory=list)
    map_mean: Tensor | None = None

    @property
    def best(self) -> ReferenceFit:
        """The fit with the highest ELBO estimate."""
        return self.fits[0]


@contextmanager
def isolated_pyro(seed: int) -> Iterator[None]:
    """Run pyro seeded with ``pyro.set_rng_seed(seed)`` in a fresh parameter-store scope,
    then restore the caller's global RNG states (torch CPU and initialised CUDA devices, numpy,
    Python) and parameter store."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=devices), pyro.get_param_store().scope():
            pyro.set_rng_seed(int(seed))
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def observation(likelihood: Likelihood, f: Tensor) -> dist.Distribution:
    """pyro's distribution of ``y`` given the outputs ``f`` ``[..., N]``, one event of N."""
    if isinstance(likelihood, GaussianLikelihood):
        return dist.Normal(f, float(likelihood.noise_variance) ** 0.5).to_event(1)
    if isinstance(likelihood, BernoulliLikelihood):
        return dist.Bernoulli(logits=f).to_event(1)
    raise ConfigError(f"no pyro observation model for the likelihood {likelihood!r}")


def network_model(network: MLPShape, x: Tensor, y: Tensor, likelihood: Likelihood,
                  prior_precision: float) -> Callable[[], None]:
    """The pyro model: ``theta ~ N(0, delta^-1 I)``, ``y ~ p(y | network(x; theta))``; draws
    of ``theta`` with leading batch dimensions (vectorised particles) are pushed through the
    network together."""
    p = network.n_params
    loc = torch.zeros(p, dtype=x.dtype)
    scale = torch.full((p,), float(prior_precision) ** -0.5, dtype=x.dtype)
    forward = vmap(network.forward_1d, in_dims=(0, None))
    observation(likelihood, y)  # an unknown likelihood fails here, before any fit

    def model() -> None:
        theta = pyro.sample(SITE, dist.Normal(loc, scale).to_event(1))
        batch = theta.shape[:-1]
        f = forward(theta.reshape(-1, p), x).reshape(*batch, x.shape[0])
        pyro.sample("y", observation(likelihood, f), obs=y)

    return model


def run_svi(model: Callable[[], None], guide, steps: int, lr: float, final_lr: float,
            num_particles: int) -> float:
    """``steps`` SVI steps, ClippedAdam's learning rate decayed by ``lrd`` from ``lr`` to
    ``final_lr``; the mean loss over the last :data:`FINAL_LOSS_SHARE` of them."""
    decay = (final_lr / lr) ** (1 / steps)
    svi = SVI(model, guide, ClippedAdam({"lr": lr, "lrd": decay}),
              Trace_ELBO(num_particles=num_particles, vectorize_particles=num_particles > 1,
                         max_plate_nesting=0))
    losses = [svi.step() for _ in range(steps)]
    tail = losses[-max(1, int(FINAL_LOSS_SHARE * steps)):]
    return float(np.mean(tail))


def posterior_as_q(posterior: dist.Distribution) -> CovarianceGaussian:
    """A guide's ``get_posterior()`` (diagonal, low-rank or full-rank normal) as a detached
    :class:`CovarianceGaussian`."""
    if isinstance(posterior, dist.MultivariateNormal):
        return CovarianceGaussian.full_rank(posterior.loc.detach(),
                                            posterior.scale_tril.detach())
    if isinstance(posterior, dist.LowRankMultivariateNormal):
        return CovarianceGaussian(posterior.loc.detach(), posterior.cov_factor.detach(),
                                  posterior.cov_diag.detach())
    if isinstance(posterior, dist.Independent) and isinstance(posterior.base_dist,
                                                              dist.Normal):
        return CovarianceGaussian.mean_field(posterior.base_dist.loc.detach(),
                                             posterior.base_dist.scale.detach())
    raise ConfigError(f"no Gaussian q for the guide posterior {type(posterior).__name__}")


def map_estimate(model: Callable[[], None], start: Tensor, settings: ReferenceVISettings,
                 seed: int) -> Tensor:
    """The MAP from ``start``: SVI with ``AutoDelta`` (its ELBO is the log joint), one particle,
    ``map_steps`` steps decaying from ``map_lr`` to ``final_lr``."""
    with isolated_pyro(seed):
        guide = AutoDelta(model, init_loc_fn=init_to_value(values={SITE: start}))
        run_svi(model, guide, settings.map_steps, settings.map_lr,
                min(settings.final_lr, settings.map_lr), 1)
        return guide.median()[SITE].detach().clone()


def fit_guide(model: Callable[[], None], guide_name: str, start: Tensor,
              settings: ReferenceVISettings, seed: int) -> tuple[CovarianceGaussian, float,
                                                                 float]:
    """One guide from the mean ``start``: (its q, the final mean loss, seconds)."""
    watch = Stopwatch()
    with isolated_pyro(seed):
        options = {"init_loc_fn": init_to_value(values={SITE: start}),
                   "init_scale": float(settings.init_scale)}
        if guide_name == "low_rank" and settings.rank is not None:
            options["rank"] = min(int(settings.rank), int(start.shape[0]))
        guide = GUIDES[guide_name](model, **options)
        loss = run_svi(model, guide, settings.steps, settings.lr, settings.final_lr,
                       settings.num_particles)
        q = posterior_as_q(guide.get_posterior())
    return q, loss, watch.elapsed()


def reference_vi(network: MLPShape, x: Tensor, y: Tensor, likelihood: Likelihood,
                 prior_precision: float, initial_mean: Tensor, *, seed: int,
                 settings: ReferenceVISettings | None = None,
                 means: dict[str, Tensor] | None = None) -> ReferenceVIResult:
    """Fit every guide of ``settings`` from every start (``init``: ``initial_mean``; ``map``;
    the named ``means``), score each with :func:`gaussian_elbo`; fits sorted best first.
    All randomness derives from ``seed``; the global RNGs are left as they were."""
    settings = settings or ReferenceVISettings()
    require_positive("prior_precision", prior_precision)
    dtype = initial_mean.dtype
    x, y = x.to(dtype), y.to(dtype)
    reserved = {"init", "map"} & set(means or {})
    if reserved:
        raise ConfigError(f"start names {sorted(reserved)} are reserved for the "
                          "initialisation and the MAP; name the passed means otherwise")
    starts = {"init": initial_mean.detach().clone(),
              **{name: mean.detach().to(dtype).clone() for name, mean in (means or {}).items()}}
    for name, mean in starts.items():
        if mean.shape != (network.n_params,):
            raise ConfigError(f"start {name!r} has shape {tuple(mean.shape)}; the network "
                              f"{network.widths} has {network.n_params} parameters")
    model = network_model(network, x, y, likelihood, prior_precision)
    result = ReferenceVIResult()
    if settings.map_steps:
        result.map_mean = map_estimate(model, starts["init"], settings,
                                       derived_seed([seed, MAP_STREAM]))
        starts = {"init": starts["init"], "map": result.map_mean,
                  **{k: v for k, v in starts.items() if k != "init"}}
    for i, (start_name, start) in enumerate(starts.items()):
        for j, guide_name in enumerate(settings.guides):
            q, loss, seconds = fit_guide(model, guide_name, start, settings,
                                         derived_seed([seed, GUIDE_STREAM, i, j]))
            score = gaussian_elbo(network, x, y, likelihood, prior_precision, q,
                                  mc_samples=int(settings.elbo_samples),
                                  generator=make_generator(
                                      derived_seed([seed, SCORE_STREAM, i, j])))
            result.fits.append(ReferenceFit(start_name, guide_name, q, score, loss, seconds))
    result.fits.sort(key=lambda fit: -fit.elbo.elbo)
    return result


def reference_vi_for(method, x: Tensor, y: Tensor, seed: int, *,
                     settings: ReferenceVISettings | None = None,
                     means: dict[str, Tensor] | None = None) -> ReferenceVIResult:
    """The reference VI for the model of a GGN posterior method
    (:class:`~bench.methods.laplace.ggn_methods.GGNPosteriorMethod`: its network, likelihood,
    ``delta`` and the shared initialisation of ``seed``) on the training data ``(x, y)``: the
    oracle beside that method's fit of the same job."""
    network = method.network(int(x.shape[1]))
    return reference_vi(network, x, y, method.likelihood_model(),
                        float(method.prior_precision), method.initial_mean(network, seed),
                        seed=seed, settings=settings, means=means)
