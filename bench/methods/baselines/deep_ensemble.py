"""Deep ensemble (Lakshminarayanan et al., 2017) of mean/log-variance MLPs.

Each member is a ``d-h-...-h-2`` MLP (outputs mean and log-variance) trained on the Gaussian
NLL with Adam in minibatches by :func:`bench.training.loop.fit_parameters`, with early
stopping on the validation NLL and the best epoch's weights restored. Every random draw of
member ``m`` (initialisation and minibatch order) comes from its own generator derived from
``(seed, m)``; the global RNG is not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import require_choice, require_positive
from bench.harness.rng import derived_seed, make_generator
from bench.harness.timing import Stopwatch
from bench.models.activations import ACTIVATIONS
from bench.models.mlp import MLPShape, init_parameters
from bench.predictive.densities import Gaussian
from bench.training.loop import TrainingConfig, fit_parameters


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
        watch = Stopwatch()
        self.shape = MLPShape((data.n_features, *self.n_hidden, 2), self.activation)
        self.thetas, epochs, best_epochs, val_nlls = [], [], [], []
        for member in range(self.members):
            # Member m's 64-bit seed is the m-th SeedSequence child of seed: independent of M.
            member_seed = derived_seed(seed, spawn_key=(member,), bits=64)
            theta, diagnostics = self._train_member(data, make_generator(member_seed))
            self.thetas.append(theta)
            epochs.append(diagnostics["epochs"])
            best_epochs.append(diagnostics["best_epoch"])
            val_nlls.append(diagnostics["val_nll"])
        return {"epochs": epochs, "best_epoch": best_epochs, "val_nll": val_nlls,
                "n_parameters": self.shape.n_params * self.members,
                "fit_s": watch.elapsed()}

    def _train_member(self, splits: RegressionSplits, generator: torch.Generator):
        """One member: Adam on minibatch NLL, keep the epoch with the best validation NLL."""
        x, y = splits.x_train.float(), splits.y_train[:, 0].float()
        x_val, y_val = splits.x_val.float(), splits.y_val[:, 0].float()
        theta = init_parameters(self.shape, generator).requires_grad_(True)
        config = TrainingConfig(lr=self.lr, max_epochs=self.max_epochs,
                                batch_size=self.batch_size, patience=self.patience)
        history = fit_parameters(
            [theta], lambda rows: gaussian_nll(self.shape.forward(theta, x[rows]), y[rows]),
            n_rows=len(y), config=config, generator=generator, desc="ensemble member",
            validation=lambda: gaussian_nll(self.shape.forward(theta, x_val), y_val),
        )
        return theta.detach(), {"epochs": history.epochs, "best_epoch": history.best_epoch,
                                "val_nll": history.best_validation}

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
