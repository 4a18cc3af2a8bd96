"""Methods on released checkpoints (Laplace Redux Figure 10): MAP, temperature scaling and the
ensemble of the benchmark's training algorithms; nothing is trained.

``fit(data, seed)`` reads a :class:`~bench.datasets.wilds.WildsJob` (the seed's splits and
checkpoints); ``predict(x)`` takes a loader of ``(inputs, targets)`` batches (the targets are
not read) and returns a :class:`~bench.predictive.categorical.Categorical` (classification) or
a :class:`~bench.predictive.densities.Gaussian` (regression). Regression follows the authors'
code (reproduction notes section 6): the noise sd is fitted on the validation split from the
ERM network's predictions (:func:`~bench.methods.baselines.gaussian_noise.fit_noise_sd`) and
its square is added to each method's variance (MAP: 0; ensemble: the members' unbiased
variance).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from bench.datasets.wilds import WildsJob
from bench.harness.errors import ConfigError, require_choice
from bench.methods.baselines.gaussian_noise import fit_noise_sd
from bench.methods.baselines.temperature_scaling import fit_temperature
from bench.models.wilds_networks import FeatureNetwork, features_and_outputs
from bench.predictive.categorical import Categorical
from bench.predictive.densities import Gaussian

NOISE_DEFAULTS = {"lr": 0.1, "epochs": 10, "batch_size": 64, "initial_sd": 1.0}


def network_outputs(network: FeatureNetwork, loader: DataLoader, device: str) -> Tensor:
    """The network's outputs ``[N, K]`` over a loader (float32, CPU)."""
    return features_and_outputs(network, loader, device)[1]


def validation_noise_sd(job: WildsJob, member: str, noise: dict[str, Any], device: str
                        ) -> float:
    """The noise sd fitted on the validation split with ``member``'s predictions as means."""
    settings = {**NOISE_DEFAULTS, **(noise or {})}
    mean = network_outputs(job.network(member), job.loader("validation"), device)
    return fit_noise_sd(mean.reshape(-1), job.targets("validation"), float(settings["lr"]),
                        int(settings["epochs"]), int(settings["batch_size"]),
                        float(settings["initial_sd"]))


class ClassificationReadout:
    """A classification data set: no noise to fit; softmax predictives."""

    def fit_noise(self, job: WildsJob, member: str, noise: dict[str, Any], device: str
                  ) -> dict[str, float]:
        """Nothing to fit."""
        return {}

    def single(self, outputs: Tensor, noise_sd: float | None) -> Categorical:
        """The softmax of one network's logits ``[N, K]``."""
        return Categorical.from_logits(outputs.double())

    def ensemble(self, outputs: Tensor, noise_sd: float | None) -> Categorical:
        """The mean of the members' softmaxes (``outputs`` ``[M, N, K]``, float64)."""
        return Categorical.mean_of(torch.softmax(outputs, dim=-1))


class RegressionReadout:
    """A regression data set: the noise sd fitted on the validation split is added."""

    def fit_noise(self, job: WildsJob, member: str, noise: dict[str, Any], device: str
                  ) -> dict[str, float]:
        """``{"noise_sd": ...}`` from ``member``'s validation predictions."""
        return {"noise_sd": validation_noise_sd(job, member, noise, device)}

    def single(self, outputs: Tensor, noise_sd: float | None) -> Gaussian:
        """``N(f(x), noise_sd^2)``."""
        mean = outputs.double().reshape(-1)
        return Gaussian(mean, torch.full_like(mean, noise_sd**2))

    def ensemble(self, outputs: Tensor, noise_sd: float | None) -> Gaussian:
        """The members' mean and unbiased variance plus the noise variance."""
        outputs = outputs.reshape(len(outputs), -1)
        return Gaussian(outputs.mean(dim=0), outputs.var(dim=0) + noise_sd**2)


# How a checkpoint method reads each task of a data set (``dataset.task``).
TASK_READOUTS: dict[str, ClassificationReadout | RegressionReadout] = {
    "classification": ClassificationReadout(), "regression": RegressionReadout()}
TASKS = tuple(TASK_READOUTS)


def task_readout(job: WildsJob) -> ClassificationReadout | RegressionReadout:
    """The readout of the job's data set task (a one-line ConfigError for another task)."""
    return TASK_READOUTS[require_choice("dataset.task", job.data.task, TASKS)]


@dataclass
class CheckpointMap:
    """MAP: the ERM checkpoint's own predictive (softmax, or N(f(x), sigma^2))."""

    name: str = "MAP"
    member: str = "ERM"
    noise: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = False
    tasks: ClassVar[tuple[str, ...]] = TASKS

    def checkpoint_keys(self, job: WildsJob) -> list[str]:
        """The checkpoints this method reads."""
        return [self.member]

    def fit(self, data: WildsJob, seed: int, base: Any = None) -> dict:
        """Load the checkpoint; for regression fit the noise sd on the validation split."""
        self.job, self.readout = data, task_readout(data)
        self.network = data.network(self.member)
        noise = self.readout.fit_noise(data, self.member, self.noise, self.device)
        self.noise_sd = noise.get("noise_sd")
        return {"member": self.member, **noise}

    def predict(self, x: DataLoader) -> Categorical | Gaussian:
        """Softmax of the outputs, or the Gaussian with the fitted noise variance."""
        return self.readout.single(network_outputs(self.network, x, self.device),
                                   self.noise_sd)


@dataclass
class TemperatureScaledCheckpoint:
    """Temperature scaling of the ERM checkpoint's logits, T fitted on the validation split."""

    name: str = "TS"
    member: str = "ERM"
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = False
    tasks: ClassVar[tuple[str, ...]] = ("classification",)

    def checkpoint_keys(self, job: WildsJob) -> list[str]:
        """The checkpoints this method reads."""
        return [self.member]

    def fit(self, data: WildsJob, seed: int, base: Any = None) -> dict:
        """Fit T on the validation logits."""
        if data.data.task not in self.tasks:
            raise ConfigError(f"method {self.name} is for classification; {data.data.name} is "
                              "a regression data set")
        self.network = data.network(self.member)
        logits = network_outputs(self.network, data.loader("validation"), self.device)
        self.temperature = fit_temperature(logits, data.targets("validation"))
        return {"member": self.member, "temperature": self.temperature,
                "n_validation": len(logits)}

    def predict(self, x: DataLoader) -> Categorical:
        """``softmax(logits / T)``."""
        logits = network_outputs(self.network, x, self.device).double()
        return Categorical.from_logits(logits / self.temperature)


@dataclass
class CheckpointEnsemble:
    """The ensemble of the benchmark's released networks of one seed (members: checkpoint
    keys; null: every checkpoint the data set node names, in its order)."""

    name: str = "DE"
    members: list[str] | None = None
    noise: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = False
    tasks: ClassVar[tuple[str, ...]] = TASKS

    def checkpoint_keys(self, job: WildsJob) -> list[str]:
        """The members' checkpoints."""
        return list(self.members) if self.members else list(job.data.checkpoints)

    def fit(self, data: WildsJob, seed: int, base: Any = None) -> dict:
        """Load every member; for regression fit the noise sd with the first member (ERM)."""
        self.keys = self.checkpoint_keys(data)
        if len(self.keys) < 2:
            raise ConfigError(f"method.members={self.keys} is not valid; an ensemble needs "
                              "at least two checkpoints")
        self.networks = [data.network(key) for key in self.keys]
        self.readout = task_readout(data)
        noise = self.readout.fit_noise(data, self.keys[0], self.noise, self.device)
        self.noise_sd = noise.get("noise_sd")
        return {"members": self.keys, **noise}

    def predict(self, x: DataLoader) -> Categorical | Gaussian:
        """Mean of the members' softmaxes; regression: the members' mean and unbiased
        variance plus the noise variance."""
        outputs = torch.stack([network_outputs(network, x, self.device).double()
                               for network in self.networks])
        return self.readout.ensemble(outputs, self.noise_sd)
