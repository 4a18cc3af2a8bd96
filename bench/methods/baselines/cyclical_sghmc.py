"""Cyclical stochastic-gradient HMC (cSG-MCMC, Zhang et al. 2020) as the Laplace Redux code
ran it (reproduction notes §3, §10.13), behind the method contract.

The network trains from scratch for ``cycles`` (4) x ``epochs_per_cycle`` (50) epochs in
minibatches of ``batch_size`` (512; the authors' (F)MNIST loader), each through the training
set's augmentation when it has one (CIFAR-10: crop and flip, drawn from the minibatch
generator). Every step takes the
gradient g of the mean cross-entropy and, with step size ``lr_t``, updates

    b <- (1 - friction) b - lr_t (g + weight_decay theta) [+ sqrt(2 lr_t friction / N^2) eps]
    theta <- theta + b

(:func:`sghmc_update`; friction 0.9, weight decay 5e-4, N training points). The step size
follows a cosine from ``lr`` (0.1) to 0 within each cycle, per step over the cycle's steps
(:func:`cyclical_step_size`). The noise term, with eps ~ N(0, I) from a generator seeded by
the fit seed, is added only in the last ``sampling_epochs`` (3) epochs of each cycle, and
theta is kept after each of those epochs: 4 x 3 = 12 samples. The noise variance 2 lr friction
/ N^2 is the code's: its temperature 1/N on the posterior of the mean loss.

The predictive is the mean of the samples' softmaxes. A sample is the network's whole state
(parameters and buffers) when it is kept: for a network with batch norm, each sample predicts
with the running statistics the chain had accumulated by then (what the code saved), without
a refresh. Dropout, if the network has any, draws from torch's global RNG seeded from the fit
seed; the code's CIFAR runs set WRN dropout to 0 (``model: {options: {dropout: 0.0}}``).

Code vs this class: the code's step-size counter assumes 128-row batches while its (F)MNIST
loader gives 512, so its step size drops once per epoch (notes §10.13); here it decays per
step over the cycle's real steps (the same cycle length, a smooth cosine).
``step_counter="code"`` takes the code's counter instead (:func:`code_step_size`), for the
side run that measures the difference. Samples are stored
by :func:`bench.harness.state_store.stored_state` (kind ``csghmc``) with a checkpoint after
every epoch (theta, momenta, step count, generator states, samples so far).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError, require_choice
from bench.harness.rng import (
    make_generator,
    seeded_global_rng,
)
from bench.harness.state_store import Checkpoints, stored_state
from bench.methods.baselines.scratch_training import (
    GLOBAL_STREAM,
    MINIBATCH_STREAM,
    NOISE_STREAM,
    EpochLog,
    ScratchClassifier,
    logged_batch_loss,
    require_count,
    require_real,
    resume_run,
    run_checkpoint,
    stream_seed,
    training_tensors,
)
from bench.predictive.categorical import Categorical
from bench.training.loop import LoopState, TrainingConfig, fit_parameters


def cyclical_step_size(step: int, steps_per_cycle: int, lr: float) -> float:
    """``lr (1 + cos(pi t / T)) / 2`` at step ``t = step mod T`` of a cycle of ``T`` steps."""
    return 0.5 * lr * (1 + math.cos(math.pi * (step % steps_per_cycle) / steps_per_cycle))


def code_step_size(step: int, *, steps_per_epoch: int, n_data: int, epochs: int, cycles: int,
                   lr: float, assumed_batch: int = 128) -> float:
    """The step size of the authors' CSGHMC trainer at ``step`` (its ``adjust_lr``): it
    counts ``epoch * (n_data / assumed_batch + 1) + batch`` (true division, as in Python 3)
    over a cycle of ``(epochs * (n_data / assumed_batch + 1)) // cycles``; with batches larger
    than ``assumed_batch`` the counter covers only part of each nominal epoch, then jumps at
    the next epoch (notes §10.13)."""
    nominal = n_data / assumed_batch + 1
    period = (epochs * nominal) // cycles
    epoch, batch = divmod(step, steps_per_epoch)
    counter = epoch * nominal + batch
    return 0.5 * lr * (math.cos(math.pi * (counter % period) / period) + 1)


def steps_schedule(sampler: CyclicalSGHMC, n_data: int, steps_per_epoch: int) -> None:
    """``step_counter="steps"``: no override, the sampler's smooth cosine over real steps."""
    return None


def code_schedule(sampler: CyclicalSGHMC, n_data: int, steps_per_epoch: int
                  ) -> Callable[[int], float]:
    """``step_counter="code"``: the authors' counter (:func:`code_step_size`) per step."""
    epochs = sampler.cycles * sampler.epochs_per_cycle
    return lambda step: code_step_size(step, steps_per_epoch=steps_per_epoch, n_data=n_data,
                                       epochs=epochs, cycles=sampler.cycles, lr=sampler.lr)


# The step-size schedules by ``method.step_counter`` (None: the sampler's own).
STEP_SIZE_SCHEDULES = {"steps": steps_schedule, "code": code_schedule}
STEP_COUNTERS = tuple(STEP_SIZE_SCHEDULES)


def sghmc_update(theta: Tensor, momentum: Tensor, grad: Tensor, *, lr: float, friction: float,
                 weight_decay: float, noise: Tensor | None = None, n_data: int = 1) -> None:
    """One SGHMC step in place: ``b <- (1 - friction) b - lr (grad + weight_decay theta)``,
    plus ``sqrt(2 lr friction / n_data^2) noise`` when ``noise`` is given, then
    ``theta <- theta + b``."""
    momentum.mul_(1 - friction).add_(grad + weight_decay * theta, alpha=-lr)
    if noise is not None:
        momentum.add_(noise, alpha=math.sqrt(2 * lr * friction) / n_data)
    theta.add_(momentum)


class CyclicalSGHMCSampler(torch.optim.Optimizer):
    """:func:`sghmc_update` on every parameter with the cyclical step size, as an optimizer
    for :func:`bench.training.loop.fit_parameters`.

    Its ``state_dict`` holds the momenta and the step count (``param_groups[0]["step"]``);
    the noise ``generator`` (on the parameters' device) belongs to the caller, who saves it.
    Noise is added in the steps of the last ``sampling_epochs`` epochs of each cycle.
    """

    def __init__(self, parameters, *, lr: float, friction: float, weight_decay: float,
                 n_data: int, steps_per_epoch: int, epochs_per_cycle: int,
                 sampling_epochs: int, generator: torch.Generator,
                 step_size: Callable[[int], float] | None = None) -> None:
        super().__init__(list(parameters), {"lr": lr, "step": 0})
        self.initial_lr, self.friction, self.weight_decay = lr, friction, weight_decay
        self.n_data, self.steps_per_epoch = n_data, steps_per_epoch
        self.epochs_per_cycle, self.sampling_epochs = epochs_per_cycle, sampling_epochs
        self.generator = generator
        self.step_size = step_size or (lambda step: cyclical_step_size(
            step, steps_per_epoch * epochs_per_cycle, lr))

    def sampling(self, step: int) -> bool:
        """Whether ``step`` lies in a sampling epoch (the last ones of its cycle)."""
        epoch_in_cycle = (step // self.steps_per_epoch) % self.epochs_per_cycle
        return epoch_in_cycle >= self.epochs_per_cycle - self.sampling_epochs

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> None:
        """One update of every parameter with a gradient."""
        for group in self.param_groups:
            step = group["step"]
            lr = self.step_size(step)
            noisy = self.sampling(step)
            for theta in group["params"]:
                if theta.grad is None:
                    continue
                state = self.state[theta]
                if "momentum" not in state:
                    state["momentum"] = torch.zeros_like(theta)
                noise = (torch.randn(theta.shape, generator=self.generator, device=theta.device,
                                     dtype=theta.dtype) if noisy else None)
                sghmc_update(theta, state["momentum"], theta.grad, lr=lr,
                             friction=self.friction, weight_decay=self.weight_decay,
                             noise=noise, n_data=self.n_data)
            group["lr"], group["step"] = lr, step + 1


@dataclass
class CyclicalSGHMC(ScratchClassifier):
    """Samples of cyclical SGHMC, trained from scratch; softmax mean predictive."""

    name: str = "CSGHMC"
    cycles: int = 4
    epochs_per_cycle: int = 50
    sampling_epochs: int = 3
    lr: float = 0.1
    friction: float = 0.9
    weight_decay: float = 5e-4
    # "steps": a smooth cosine over the cycle's real steps; "code": the authors' counter,
    # which assumes 128-row batches (code_step_size).
    step_counter: str = "steps"
    step_size_schedule: Callable[..., Callable[[int], float] | None] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("cycles", "epochs_per_cycle", "sampling_epochs"):
            require_count(key, getattr(self, key))
        if self.sampling_epochs > self.epochs_per_cycle:
            raise ConfigError(f"method.sampling_epochs={self.sampling_epochs!r} is not valid; "
                              f"it must be <= epochs_per_cycle ({self.epochs_per_cycle})")
        require_real("lr", self.lr, above=0)
        require_real("friction", self.friction, above=0, at_most=1)
        require_real("weight_decay", self.weight_decay, at_least=0)
        self.step_size_schedule = STEP_SIZE_SCHEDULES[
            require_choice("method.step_counter", self.step_counter, STEP_COUNTERS)]

    def recipe(self, data: TrainingSet) -> dict:
        """Everything that decides the samples except the seed."""
        keys = ("num_classes", "cycles",
                "epochs_per_cycle", "sampling_epochs", "lr", "friction", "weight_decay",
                "batch_size")
        # The step counter appears only when it is not the default, so earlier recipes keep
        # their hashes.
        counter = {} if self.step_counter == "steps" else {"step_counter": self.step_counter}
        return {"method": "csghmc", **self.model.recipe(), **{k: getattr(self, k) for k in keys},
                **counter, "data": data.identity()}

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict:
        """Run the chain on ``data`` (or load its stored samples); returns the number of
        samples, epochs run and whether the samples were reused."""
        in_channels = int(data.train_inputs.shape[1])
        self.network = self.model.build(seed, self.num_classes, in_channels).to(self.device)
        stored = stored_state("csghmc", data.name, self.recipe(data), seed,
                              lambda checkpoints: self._train(data, seed, checkpoints),
                              data.results_dir)
        self.samples = {name: value.to(self.device) for name, value in stored.state.items()}
        last = stored.history[-1] if stored.history else {}
        return {"samples": self.n_samples, "epochs": len(stored.history),
                "objective": last.get("objective"), "state_reused": stored.reused,
                "state_hash": stored.recipe_hash}

    def _step_size(self, n_data: int, steps_per_epoch: int) -> Callable[[int], float] | None:
        """The code's step size per step when ``step_counter`` is "code", else None (the
        sampler's smooth cosine)."""
        return self.step_size_schedule(self, n_data, steps_per_epoch)

    @property
    def n_samples(self) -> int:
        """Number of samples kept."""
        return len(next(iter(self.samples.values())))

    def _train(self, data: TrainingSet, seed: int, checkpoints: Checkpoints
               ) -> tuple[dict[str, Tensor], list[dict]]:
        """Run the chain from the network's initial weights, or from the last checkpoint;
        returns the samples (each state entry stacked over samples) and the history."""
        network, device = self.network, self.device
        images, labels = training_tensors(data, device)
        n = len(labels)
        steps_per_epoch = math.ceil(n / self.batch_size)
        batches = make_generator(stream_seed(seed, MINIBATCH_STREAM))
        augment = data.augmenter()
        noise = make_generator(stream_seed(seed, NOISE_STREAM), device)
        sampler = CyclicalSGHMCSampler(
            network.parameters(), lr=self.lr, friction=self.friction,
            weight_decay=self.weight_decay, n_data=n, steps_per_epoch=steps_per_epoch,
            epochs_per_cycle=self.epochs_per_cycle, sampling_epochs=self.sampling_epochs,
            generator=noise, step_size=self._step_size(n, steps_per_epoch))
        generators = {"batch_rng": batches, "noise_rng": noise}
        saved = checkpoints.load()
        history: list[dict] = [] if saved is None else list(saved["history"])
        samples: list[dict] = [] if saved is None else list(saved["samples"])
        log = EpochLog(history)
        batch_loss = logged_batch_loss(images, labels, augment, batches, log,
                                       lambda x, y: F.cross_entropy(network(x), y))

        def epoch_end(state: LoopState) -> None:
            epoch = state.epochs_done - 1
            keep = sampler.sampling(epoch * steps_per_epoch)
            if keep:
                samples.append({k: v.detach().clone() for k, v in network.state_dict().items()})
            log.close_epoch(epoch, state.optimizer["param_groups"][0]["lr"], sample=keep)
            checkpoints.save(run_checkpoint(state, network, device, generators,
                                            samples=samples, history=history))

        # The loop's own lr and schedule are unused: the sampler sets the step size.
        config = TrainingConfig(lr=self.lr, max_epochs=self.cycles * self.epochs_per_cycle,
                                batch_size=self.batch_size, optimizer="sgd")
        with seeded_global_rng(stream_seed(seed, GLOBAL_STREAM), device):
            resume = resume_run(saved, network, device, generators)
            network.train()
            fit_parameters(list(network.parameters()), batch_loss, n_rows=n, config=config,
                           generator=batches, desc="CSGHMC", on_epoch_end=epoch_end,
                           resume=resume, optimizer=sampler)
        network.eval()
        stacked = {name: torch.stack([sample[name] for sample in samples])
                   for name in samples[0]}
        return stacked, history

    def predict(self, x: Tensor) -> Categorical:
        """Mean of the samples' softmaxes per row of ``x`` (eval mode), in batches of
        ``prediction.batch_size`` on ``device``."""
        self.network.eval()
        total = None
        with torch.no_grad():
            for s in range(self.n_samples):
                state = {name: value[s] for name, value in self.samples.items()}
                probs = torch.cat([
                    torch.softmax(functional_call(
                        self.network, state,
                        (x[i:i + self.prediction.batch_size].to(self.device),)), dim=-1)
                    for i in range(0, len(x), self.prediction.batch_size)])
                total = probs if total is None else total + probs
        return Categorical(total / self.n_samples)

    def stored_tensors(self) -> dict[str, Tensor]:
        """The samples: every entry of the network's state, stacked over the samples."""
        return dict(self.samples)
