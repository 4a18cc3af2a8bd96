"""Last-layer Laplace on a released checkpoint (Laplace Redux Figure 10, notes sections 1, 6).

laplace-torch ``Laplace(head, likelihood, subset_of_weights="last_layer", hessian_structure,
prior_precision, backend=BackPackGGN)`` with a fixed prior precision (5.5 / 23 / 29 / 30 / 10
for Camelyon17 / CivilComments / FMoW / Amazon / PovertyMap, full covariance, K-FAC for
FMoW), fitted on the training split; GLM predictive, classification by 10,000 Monte Carlo
draws of the logits, regression ``(mean, f_var)`` plus the noise variance fitted on the
validation split (sigma = 1 in the Hessian, as the authors' code left laplace-torch's default).

The network's body runs once per split: laplace-torch sees the last layer's inputs and the
last layer alone (``nn.Sequential(head)``, its last layer ``"0"``). The last-layer GGN and the
GLM predictive depend on the network only through those inputs, so this is the last-layer
Laplace of the whole network (a test compares it with laplace-torch on the whole network).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from bench.datasets.wilds import WildsJob
from bench.harness.errors import require_choice, require_positive, require_positive_int
from bench.harness.rng import make_generator
from bench.methods.baselines.checkpoint_methods import TASKS, task_readout
from bench.methods.laplace.la_backends import BACKENDS, backend_class
from bench.methods.settings import PredictionSettings, settings_node
from bench.models.wilds_networks import features_and_outputs
from bench.predictive.categorical import Categorical
from bench.predictive.densities import Gaussian

STRUCTURES = ("full", "kron", "diag")


class ClassificationHead:
    """laplace-torch's classification Laplace of the head; Monte Carlo GLM predictive."""

    laplace_options: ClassVar[dict[str, Any]] = {}

    def targets(self, targets: Tensor) -> Tensor:
        """Class indices as laplace-torch takes them."""
        return targets.long()

    def predictive(self, la: Any, chunks: Sequence[Tensor], noise_sd: float | None,
                   n_samples: int, seed: int, device: str) -> Categorical:
        """The class probabilities averaged over ``n_samples`` draws of the logits per chunk,
        all chunks from one generator of ``seed``."""
        generator = make_generator(seed, str(torch.device(device)))
        probs = [la.predictive_samples(chunk, pred_type="glm", n_samples=n_samples,
                                       generator=generator).mean(dim=0).double().cpu()
                 for chunk in chunks]
        return Categorical(torch.cat(probs).detach())


class RegressionHead:
    """laplace-torch's regression Laplace of the head (sigma = 1 in the Hessian, the
    library's default the authors left); the GLM predictive plus the fitted noise variance."""

    laplace_options: ClassVar[dict[str, Any]] = {"sigma_noise": 1.0}

    def targets(self, targets: Tensor) -> Tensor:
        """A float column of targets."""
        return targets.reshape(-1, 1).float()

    def predictive(self, la: Any, chunks: Sequence[Tensor], noise_sd: float | None,
                   n_samples: int, seed: int, device: str) -> Gaussian:
        """``N(f(x), f_var + noise_sd^2)`` from the closed-form GLM predictive."""
        means, variances = [], []
        with torch.no_grad():
            for chunk in chunks:
                mean, f_var = la(chunk, pred_type="glm")
                means.append(mean.reshape(-1).double().cpu())
                variances.append(f_var.reshape(-1).double().cpu())
        return Gaussian(torch.cat(means), torch.cat(variances) + noise_sd**2)


# The head's Laplace and predictive by the data set's task (laplace-torch's likelihood).
HEAD_TASKS: dict[str, ClassificationHead | RegressionHead] = {
    "classification": ClassificationHead(), "regression": RegressionHead()}


def head_laplace(head: nn.Linear, likelihood: str, hessian_structure: str, backend: str,
                 prior_precision: float, features: Tensor, targets: Tensor, batch_size: int,
                 device: str) -> Any:
    """laplace-torch's last-layer Laplace of ``head`` fitted on its inputs ``features``."""
    from laplace import Laplace

    task = HEAD_TASKS[require_choice("dataset.task", likelihood, HEAD_TASKS)]
    model = nn.Sequential(copy.deepcopy(head)).to(device).eval()
    la = Laplace(model, likelihood, subset_of_weights="last_layer", last_layer_name="0",
                 hessian_structure=hessian_structure, prior_precision=float(prior_precision),
                 backend=backend_class(backend), **task.laplace_options)
    la.fit(DataLoader(TensorDataset(features.float(), task.targets(targets)),
                      batch_size=batch_size))
    return la


@dataclass
class CheckpointLastLayerLaplace:
    """Last-layer Laplace around the ERM checkpoint (module docstring)."""

    name: str = "LA"
    member: str = "ERM"
    hessian_structure: str = "full"
    backend: str = "BackPackGGN"
    prior_precision: float = 1.0
    n_samples: int = 10000
    fit_batch_size: int = 512
    prediction: PredictionSettings = PredictionSettings(batch_size=256)
    noise: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = False
    tasks: ClassVar[tuple[str, ...]] = TASKS

    def __post_init__(self) -> None:
        self.prediction = settings_node(PredictionSettings, self.prediction)
        require_choice("method.hessian_structure", self.hessian_structure, STRUCTURES)
        require_choice("method.backend", self.backend, BACKENDS)
        require_positive("method.prior_precision", self.prior_precision)
        for key in ("n_samples", "fit_batch_size"):
            require_positive_int(f"method.{key}", getattr(self, key))

    def checkpoint_keys(self, job: WildsJob) -> list[str]:
        """The checkpoint this method reads."""
        return [self.member]

    def fit(self, data: WildsJob, seed: int, base: Any = None) -> dict:
        """The last-layer posterior from the training split (and, for regression, the noise
        sd from the validation split)."""
        self.network = data.network(self.member)
        self.likelihood = data.data.task
        self.seed = int(seed)
        features, _ = features_and_outputs(self.network, data.loader("train"), self.device)
        with warnings.catch_warnings():
            # Token inputs (text) need no gradient, which BackPACK's module hooks warn about.
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            self.la = head_laplace(self.network.head, self.likelihood, self.hessian_structure,
                                   self.backend, self.prior_precision, features,
                                   data.targets("train"), self.fit_batch_size, self.device)
        diagnostics = {"member": self.member, "prior_precision": float(self.prior_precision),
                       "hessian_structure": self.hessian_structure, "backend": self.backend,
                       "laplace_class": type(self.la).__name__,
                       "n_parameters": int(self.la.n_params), "n_train": len(features),
                       "n_samples": self.n_samples}
        noise = task_readout(data).fit_noise(data, self.member, self.noise, self.device)
        self.noise_sd = noise.get("noise_sd")
        return {**diagnostics, **noise}

    def predict(self, x: DataLoader) -> Categorical | Gaussian:
        """GLM predictive at the loader's inputs (module docstring)."""
        features, _ = features_and_outputs(self.network, x, self.device)
        chunks = features.to(self.device).split(self.prediction.batch_size)
        return HEAD_TASKS[self.likelihood].predictive(self.la, chunks, self.noise_sd,
                                                      self.n_samples, self.seed, self.device)
