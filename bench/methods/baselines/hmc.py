"""HMC baseline: pyro's HMC kernel, or its bit-for-bit fast replay, on an MLP regression network,
set up like the SSLA authors' hamiltorch runs (Table 2; reproduction notes §6 and §10 item 13).

The posterior is over the flat parameter vector theta of an MLP f_theta with prior
N(0, 1/tau_in) per parameter and Gaussian likelihood log p(y | theta) = -tau_out/2 sum (y - f)^2
(constants dropped). The network is the flat :class:`bench.models.mlp.MLPShape`, so one potential
gradient is a single small forward/backward pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyro
import torch
from pyro.infer.mcmc import HMC, MCMC
from pyro.infer.mcmc.adaptation import BlockMassMatrix
from pyro.ops.stats import effective_sample_size, split_gelman_rubin
from torch import Tensor

from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import ConfigError, require_choice, require_positive
from bench.harness.progress import progress_enabled
from bench.harness.timing import Stopwatch
from bench.methods.baselines.hmc_replay import GaussianMLPPotential, sample_hmc
from bench.models.activations import ACTIVATIONS
from bench.models.mlp import MLPShape, init_parameters
from bench.predictive.densities import Gaussian

# Copies of the sample variance in the predictive variance by ``method.variance``: the
# authors' double count (paper) or one (corrected).
VARIANCE_COPIES = {"paper": 2.0, "corrected": 1.0}
VARIANCES = tuple(VARIANCE_COPIES)
SAMPLERS = ("fast", "pyro")
_PREDICT_CHUNK = 256
_TRACED_INPUTS = 5


@dataclass
class HMCMethod:
    """Full-batch HMC with a fixed step size, fixed trajectory length and diagonal mass matrix.

    Defaults are the authors' tuned Table 2 settings (1-50-50-1 Tanh MLP). ``n_hidden=()`` gives
    the linear model y = w x + b. ``inverse_mass`` is a scalar broadcast to the diagonal inverse
    mass matrix (hamiltorch's ``inv_mass = ones / mass``).

    Sample counts follow hamiltorch, not pyro: ``num_samples`` transitions are run in total and
    the first ``burn`` are dropped, so ``num_samples - burn`` states are kept (pyro is called
    with ``warmup_steps=burn`` and ``num_samples=num_samples - burn``; with adaptation off its
    warmup is plain burn-in). Two hamiltorch quirks are not copied: its kept list starts with
    the initial parameters, and a rejection at its first post-burn transition resets the chain
    to the initial parameters.

    ``variance="paper"`` gives 2 Var_s f + 1/tau_out, the authors' double count of the sample
    variance; ``"corrected"`` gives Var_s f + 1/tau_out. Var_s is the unbiased sample variance
    over kept draws, as ``torch.var`` in the authors' code.

    ``sampler="pyro"`` runs pyro's ``HMC`` kernel under ``MCMC`` (the oracle); ``"fast"`` runs
    :func:`bench.methods.baselines.hmc_replay.sample_hmc`, which replays that kernel's
    arithmetic and global-RNG draws without pyro's bookkeeping: the same kept states bit for
    bit, so the choice is left out of the record's config hash.
    """

    name: str = "hmc"
    n_hidden: tuple[int, ...] = (50, 50)
    activation: str = "tanh"
    tau_in: float = 1.0
    tau_out: float = 1.8914431914681566
    step_size: float = 4.1491106035962063e-4
    num_steps_per_sample: int = 14
    num_samples: int = 1867
    burn: int = 300
    inverse_mass: float = 1 / 9.0962425819262
    variance: str = "paper"
    sampler: str = "fast"
    device: str = "cpu"
    samples: Tensor | None = field(default=None, init=False, repr=False)
    shape: MLPShape | None = field(default=None, init=False, repr=False)
    run_sampler: Callable[[GaussianMLPPotential, Tensor, int], tuple[Tensor, float, float]] = (
        field(init=False, repr=False, compare=False))
    fits_on_base: ClassVar[bool] = False

    def __post_init__(self) -> None:
        require_choice("method.activation", self.activation, ACTIVATIONS)
        require_choice("method.variance", self.variance, VARIANCES)
        self.run_sampler = {"fast": self._run_fast, "pyro": self._run_pyro}[
            require_choice("method.sampler", self.sampler, SAMPLERS)]
        for key in ("tau_in", "tau_out", "step_size", "num_steps_per_sample", "num_samples",
                    "inverse_mass"):
            require_positive(f"method.{key}", getattr(self, key))
        if not 0 <= self.burn < self.num_samples:
            raise ConfigError(f"method.burn={self.burn!r} is not valid; it must lie in "
                              f"[0, method.num_samples={self.num_samples})")
        self.n_hidden = tuple(int(h) for h in self.n_hidden)

    def fit(self, data: RegressionSplits, seed: int, base=None) -> dict[str, Any]:
        """Sample the posterior on the training split (no base); returns sampler diagnostics.

        ``seed`` drives a ``torch.Generator`` for the initial weights (nn.Linear's default
        init, :func:`bench.models.mlp.init_parameters`) and, because pyro's kernel draws
        momenta and accept/reject uniforms from the global torch RNG and takes no generator,
        ``pyro.set_rng_seed(seed)`` (torch, numpy and random global RNGs) is called here, just
        before sampling, never at construction.

        Diagnostics: ``acceptance_rate`` (fraction of the kept transitions that moved the chain),
        ``r_hat`` (largest single-chain split R-hat) and ``ess`` (smallest effective sample
        size) over the traces of the training log-likelihood and of f at five training inputs
        spread over the training order, ``num_kept`` and ``sampling_seconds`` (wall time of the
        sampler run).
        """
        device = torch.device(self.device)
        x, y = data.x_train.to(device), data.y_train.to(device).reshape(-1)
        self.shape = MLPShape((data.n_features, *self.n_hidden, 1), self.activation)
        generator = torch.Generator(device=device).manual_seed(seed)
        theta0 = init_parameters(self.shape, generator, x.dtype, device=device)

        target = GaussianMLPPotential(self.shape, x, y, self.tau_in, self.tau_out)
        self.samples, acceptance_rate, seconds = self.run_sampler(target, theta0, seed)
        return {**self._mixing(x, y), "acceptance_rate": acceptance_rate,
                "num_kept": int(self.samples.shape[0]), "sampling_seconds": seconds}

    def _run_fast(self, target: GaussianMLPPotential, theta0: Tensor, seed: int
                  ) -> tuple[Tensor, float, float]:
        """The project's sampler (:func:`sample_hmc`) after ``pyro.set_rng_seed(seed)``:
        (kept states, acceptance rate of the kept ones, wall seconds of the run)."""
        pyro.set_rng_seed(seed)
        watch = Stopwatch()
        run = sample_hmc(target, theta0, step_size=self.step_size,
                         num_steps=self.num_steps_per_sample, inverse_mass=self.inverse_mass,
                         num_samples=self.num_samples, burn=self.burn)
        return run.samples, run.acceptance_rate, watch.elapsed()

    def _run_pyro(self, target: GaussianMLPPotential, theta0: Tensor, seed: int
                  ) -> tuple[Tensor, float, float]:
        """pyro's HMC kernel under MCMC: (kept states, acceptance rate of the kept ones, wall
        seconds of the run)."""
        potential = target.energy
        kernel = HMC(potential_fn=lambda params: potential(params["theta"]),
                     step_size=self.step_size, adapt_step_size=False, adapt_mass_matrix=False)
        # pyro takes int(trajectory_length / step_size) leapfrog steps; the half step keeps
        # floating-point rounding from dropping one.
        kernel.trajectory_length = self.step_size * (self.num_steps_per_sample + 0.5)
        # The kernel's setup fills the diagonal inverse mass matrix with the adapter's
        # init_scale; with adaptation off it stays there.
        kernel.mass_matrix_adapter = BlockMassMatrix(init_scale=self.inverse_mass)
        counter = _AcceptanceCounter(theta0)
        mcmc = MCMC(kernel, num_samples=self.num_samples - self.burn, warmup_steps=self.burn,
                    initial_params={"theta": theta0}, hook_fn=counter,
                    disable_progbar=not progress_enabled())
        pyro.set_rng_seed(seed)
        watch = Stopwatch()
        mcmc.run()
        seconds = watch.elapsed()
        return mcmc.get_samples()["theta"].detach(), counter.rate(), seconds

    def sample_predictions(self, x: Tensor) -> Tensor:
        """Network outputs f_s(x) for every kept sample s: ``[num_kept, n]``."""
        if self.samples is None:
            raise RuntimeError("HMCMethod.fit must run before predictions")
        x = x.to(self.samples.device, self.samples.dtype)
        forward = torch.func.vmap(self.shape.forward_1d, in_dims=(0, None))
        with torch.no_grad():
            return torch.cat([forward(chunk, x) for chunk in self.samples.split(_PREDICT_CHUNK)])

    def predict(self, x: Tensor) -> Gaussian:
        """Gaussian predictive at ``x``: sample mean, and the configured variance (see class)."""
        f = self.sample_predictions(x)
        return Gaussian(f.mean(0), self.variance_copies * f.var(0) + 1.0 / self.tau_out)

    @property
    def variance_copies(self) -> float:
        """Copies of the sample variance in the predictive variance (``variance``)."""
        return VARIANCE_COPIES[self.variance]

    def _mixing(self, x: Tensor, y: Tensor) -> dict[str, float]:
        """Split R-hat and ESS of the log-likelihood and of f at a few training inputs."""
        f = self.sample_predictions(x)
        log_lik = -0.5 * self.tau_out * (y - f).square().sum(1)
        picks = torch.linspace(0, x.shape[0] - 1, _TRACED_INPUTS).round().long()
        traces = torch.cat([log_lik.unsqueeze(1), f[:, picks]], 1).double().unsqueeze(0)
        return {"r_hat": float(split_gelman_rubin(traces).max()),
                "ess": float(effective_sample_size(traces).min())}


class _AcceptanceCounter:
    """MCMC hook counting kept transitions that moved the chain (an accepted proposal)."""

    def __init__(self, theta0: Tensor) -> None:
        self.previous, self.moved, self.kept = theta0, 0, 0

    def __call__(self, kernel: HMC, params: dict[str, Tensor], stage: str, i: int) -> None:
        theta = params["theta"]
        if stage.startswith("Sample"):
            self.kept += 1
            self.moved += int(not torch.equal(theta, self.previous))
        self.previous = theta

    def rate(self) -> float:
        """Fraction of kept transitions that were accepted."""
        return self.moved / max(self.kept, 1)
