"""HMC baseline: pyro's HMC kernel on an MLP regression network, set up like the SSLA authors'
hamiltorch runs (Table 2; reproduction notes §6 and §10 item 13).

The posterior is over the flat parameter vector theta of an MLP f_theta with prior
N(0, 1/tau_in) per parameter and Gaussian likelihood log p(y | theta) = -tau_out/2 sum (y - f)^2
(constants dropped). The network is evaluated from theta by batched matmuls, so one potential
gradient is a single small forward/backward pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyro
import torch
import torch.nn.functional as F
from pyro.infer.mcmc import HMC, MCMC
from pyro.infer.mcmc.adaptation import BlockMassMatrix
from pyro.ops.stats import effective_sample_size, split_gelman_rubin
from torch import Tensor

from bench.datasets.regression import RegressionSplits
from bench.harness.errors import ConfigError, require_choice, require_positive
from bench.predictive.densities import Gaussian

ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}
VARIANCES = ("paper", "corrected")
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
    device: str = "cpu"
    samples: Tensor | None = field(default=None, init=False, repr=False)
    widths: tuple[int, ...] = field(default=(), init=False, repr=False)
    fits_on_base: ClassVar[bool] = False

    def __post_init__(self) -> None:
        require_choice("method.activation", self.activation, ACTIVATIONS)
        require_choice("method.variance", self.variance, VARIANCES)
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
        init: weight and bias uniform in +-1/sqrt(fan_in)) and, because pyro's kernel draws
        momenta and accept/reject uniforms from the global torch RNG and takes no generator,
        ``pyro.set_rng_seed(seed)`` (torch, numpy and random global RNGs) is called here, just
        before sampling, never at construction.

        Diagnostics: ``acceptance_rate`` (fraction of the kept transitions that moved the chain),
        ``r_hat`` (largest single-chain split R-hat) and ``ess`` (smallest effective sample
        size) over the traces of the training log-likelihood and of f at five training inputs
        spread over the training order, ``num_kept`` and ``sampling_seconds`` (wall time of the
        pyro run).
        """
        device = torch.device(self.device)
        x, y = data.x_train.to(device), data.y_train.to(device).reshape(-1)
        self.widths = (data.n_features, *self.n_hidden, 1)
        generator = torch.Generator(device=device).manual_seed(seed)
        theta0 = self._initial_theta(generator, x.dtype, device)

        def potential(params: dict[str, Tensor]) -> Tensor:
            theta = params["theta"]
            residual = y - self._forward(theta, x)
            return 0.5 * (self.tau_out * residual.square().sum()
                          + self.tau_in * theta.square().sum())

        kernel = HMC(potential_fn=potential, step_size=self.step_size,
                     adapt_step_size=False, adapt_mass_matrix=False)
        # pyro takes int(trajectory_length / step_size) leapfrog steps; the half step keeps
        # floating-point rounding from dropping one.
        kernel.trajectory_length = self.step_size * (self.num_steps_per_sample + 0.5)
        # The kernel's setup fills the diagonal inverse mass matrix with the adapter's
        # init_scale; with adaptation off it stays there.
        kernel.mass_matrix_adapter = BlockMassMatrix(init_scale=self.inverse_mass)
        counter = _AcceptanceCounter(theta0)
        mcmc = MCMC(kernel, num_samples=self.num_samples - self.burn, warmup_steps=self.burn,
                    initial_params={"theta": theta0}, disable_progbar=True, hook_fn=counter)
        pyro.set_rng_seed(seed)
        start = time.perf_counter()
        mcmc.run()
        seconds = time.perf_counter() - start
        self.samples = mcmc.get_samples()["theta"].detach()
        return {**self._mixing(x, y), "acceptance_rate": counter.rate(),
                "num_kept": int(self.samples.shape[0]), "sampling_seconds": seconds}

    def sample_predictions(self, x: Tensor) -> Tensor:
        """Network outputs f_s(x) for every kept sample s: ``[num_kept, n]``."""
        if self.samples is None:
            raise RuntimeError("HMCMethod.fit must run before predictions")
        x = x.to(self.samples.device, self.samples.dtype)
        with torch.no_grad():
            return torch.cat([self._forward(chunk, x)
                              for chunk in self.samples.split(_PREDICT_CHUNK)])

    def predict(self, x: Tensor) -> Gaussian:
        """Gaussian predictive at ``x``: sample mean, and the configured variance (see class)."""
        f = self.sample_predictions(x)
        copies = 2.0 if self.variance == "paper" else 1.0
        return Gaussian(f.mean(0), copies * f.var(0) + 1.0 / self.tau_out)

    def _initial_theta(self, generator: torch.Generator, dtype: torch.dtype,
                       device: torch.device) -> Tensor:
        """Flat nn.Linear default init, layer by layer, weight then bias (PyTorch's order)."""
        parts = []
        for fan_in, fan_out in zip(self.widths[:-1], self.widths[1:], strict=True):
            bound = fan_in**-0.5
            for shape in ((fan_out, fan_in), (fan_out,)):
                part = torch.empty(shape, dtype=dtype, device=device)
                parts.append(part.uniform_(-bound, bound, generator=generator).reshape(-1))
        return torch.cat(parts)

    def _forward(self, theta: Tensor, x: Tensor) -> Tensor:
        """MLP outputs at ``x`` for one flat parameter vector ``[p]`` (-> ``[n]``) or a batch
        ``[S, p]`` (-> ``[S, n]``); the single-vector path is the cheap one the sampler uses."""
        act = ACTIVATIONS[self.activation]
        h, offset, n_layers = x, 0, len(self.widths) - 1
        for layer, (fan_in, fan_out) in enumerate(zip(self.widths[:-1], self.widths[1:],
                                                      strict=True)):
            weight = theta[..., offset:offset + fan_in * fan_out].unflatten(-1, (fan_out, fan_in))
            offset += fan_in * fan_out
            bias = theta[..., offset:offset + fan_out]
            offset += fan_out
            if theta.dim() == 1:
                h = F.linear(h, weight, bias)
            else:
                h = torch.matmul(h, weight.mT) + bias.unsqueeze(-2)
            if layer < n_layers - 1:
                h = act(h)
        return h.squeeze(-1)

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
