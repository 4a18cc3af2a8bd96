"""Deep ensemble (Lakshminarayanan et al., 2017) of mean/log-variance MLPs.

Each member is a ``d-h-...-h-2`` MLP (outputs mean and log-variance) trained on the Gaussian
NLL with Adam by a plain loop over pre-shuffled index tensors (a 200-point MLP pays no
per-step framework overhead), with early stopping on the validation NLL and the best
epoch's weights restored. Every random draw of member ``m`` (initialisation and minibatch
order) comes from its own generator derived from ``(seed, m)``; the global RNG is not used.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from bench.datasets.regression import RegressionSplits
from bench.harness.errors import require_choice, require_positive
from bench.harness.rng import make_generator
from bench.models.mlp import MLPShape, init_parameters
from bench.predictive.densities import Gaussian

ACTIVATIONS = ("relu", "tanh")


def member_seeds(seed: int, members: int) -> list[int]:
    """Independent 64-bit seeds for members ``0..members-1``; member m's does not depend on M."""
    children = np.random.SeedSequence(int(seed)).spawn(members)
    return [int(child.generate_state(1, dtype=np.uint64)[0]) for child in children]


def gaussian_nll(output: Tensor, y: Tensor) -> Tensor:
    """Mean Gaussian NLL of ``y`` ``[n]`` under (mean, log-variance) columns of ``output``."""
    mean, log_variance = output[:, 0], output[:, 1]
    return 0.5 * (log_variance + (y - mean) ** 2 * torch.exp(-log_variance)
                  + math.log(2 * math.pi)).mean()


@dataclass
class DeepEnsembleMethod:
    """M independently initialised and shuffled mean/log-variance MLPs, moment-matched.

    The predictive is the equally weighted Gaussian mixture of the members reduced to one
    Gaussian: mean of the member means, mean of the member variances plus the (population)
    variance of the member means.
    """

    name: str = "deep_ensemble"
    members: int = 5
    n_hidden: tuple[int, ...] = (50, 50)
    activation: str = "relu"
    lr: float = 1e-2
    batch_size: int = 64
    max_epochs: int = 300
    patience: int = 20
    fits_on_base: ClassVar[bool] = False

    def __post_init__(self) -> None:
        require_choice("method.activation", self.activation, ACTIVATIONS)
        for key in ("members", "lr", "batch_size", "max_epochs", "patience"):
            require_positive(f"method.{key}", getattr(self, key))

    def fit(self, data: RegressionSplits, seed: int, base=None) -> dict[str, Any]:
        """Train every member (no base); returns per-member epochs, best epoch, best val NLL,
        wall time."""
        start = time.perf_counter()
        self.shape = MLPShape((data.n_features, *self.n_hidden, 2), self.activation)
        self.thetas, epochs, best_epochs, val_nlls = [], [], [], []
        for member_seed in member_seeds(seed, self.members):
            theta, diagnostics = self._train_member(data, make_generator(member_seed))
            self.thetas.append(theta)
            epochs.append(diagnostics["epochs"])
            best_epochs.append(diagnostics["best_epoch"])
            val_nlls.append(diagnostics["val_nll"])
        return {"epochs": epochs, "best_epoch": best_epochs, "val_nll": val_nlls,
                "n_parameters": self.shape.n_params * self.members,
                "fit_s": time.perf_counter() - start}

    def _train_member(self, splits: RegressionSplits, generator: torch.Generator):
        """One member: Adam on minibatch NLL, keep the epoch with the best validation NLL."""
        x, y = splits.x_train.float(), splits.y_train[:, 0].float()
        x_val, y_val = splits.x_val.float(), splits.y_val[:, 0].float()
        theta = init_parameters(self.shape, generator).requires_grad_(True)
        optimizer = torch.optim.Adam([theta], lr=self.lr)
        best_nll, best_theta, best_epoch = math.inf, theta.detach().clone(), -1
        for epoch in range(self.max_epochs):
            for batch in torch.randperm(len(y), generator=generator).split(self.batch_size):
                optimizer.zero_grad(set_to_none=True)
                gaussian_nll(self.shape.forward(theta, x[batch]), y[batch]).backward()
                optimizer.step()
            with torch.no_grad():
                val_nll = float(gaussian_nll(self.shape.forward(theta, x_val), y_val))
            if val_nll < best_nll:
                best_nll, best_theta, best_epoch = val_nll, theta.detach().clone(), epoch
            elif epoch - best_epoch >= self.patience:
                break
        return best_theta, {"epochs": epoch + 1, "best_epoch": best_epoch, "val_nll": best_nll}

    def member_predictions(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Member means and variances, each ``[members, n]``."""
        with torch.no_grad():
            outputs = torch.stack([self.shape.forward(theta, x.float()) for theta in self.thetas])
        return outputs[..., 0], outputs[..., 1].exp()

    def predict(self, x: Tensor) -> Gaussian:
        """Moment-matched Gaussian of the equally weighted member mixture."""
        means, variances = self.member_predictions(x)
        return Gaussian(mean=means.mean(0),
                        variance=variances.mean(0) + means.var(0, correction=0))
