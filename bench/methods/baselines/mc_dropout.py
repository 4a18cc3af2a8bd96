"""MC dropout (Gal & Ghahramani, 2016) for regression, with a heteroscedastic output (Kendall &
Gal, 2017): a method none of the five papers runs, added to compare Laplace against.

One ``d-h-...-h-2`` MLP (mean and log-variance) is trained on the Gaussian NLL with dropout on
every hidden layer's output (inverted dropout: kept units are scaled by ``1 / (1 - p)``), Adam
with weight decay in minibatches, early stopping on the validation set's MC-dropout NLL and the
best epoch's weights restored. The predictive keeps dropout on: ``n_samples`` masked passes,
moment-matched to one Gaussian (mean of the means; mean of the variances plus the variance of
the means). Every draw has its own stream derived from the job's seed (initialisation and
minibatch order, training masks, validation masks, prediction masks), so a prediction at the
same inputs is the same each time it is asked for; the global RNG is not used. The masks of
one call are drawn for all its inputs at once, so a point's predictive depends on the batch it
is asked in (the regression tasks ask for the whole test set in one call).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import ConfigError, require_choice, require_positive
from bench.harness.rng import derived_seed, make_generator
from bench.harness.timing import Stopwatch
from bench.methods.baselines.deep_ensemble import gaussian_nll
from bench.models.activations import ACTIVATIONS
from bench.models.mlp import MLPShape, init_parameters
from bench.predictive.densities import Gaussian
from bench.training.loop import TrainingConfig, fit_parameters

# Streams derived from the job's seed: derived_seed([seed, stream]).
INIT_STREAM, TRAIN_MASK_STREAM, VALIDATION_MASK_STREAM, PREDICTION_MASK_STREAM = 1, 2, 3, 4


def moment_matched(means: Tensor, variances: Tensor) -> Gaussian:
    """One Gaussian for the equally weighted mixture of ``[S, n]`` component moments."""
    return Gaussian(mean=means.mean(0), variance=variances.mean(0) + means.var(0, correction=0))


@dataclass
class MCDropout:
    """A dropout MLP predicting with its masks drawn, ``n_samples`` passes moment-matched."""

    name: str = "MC dropout"
    n_hidden: tuple[int, ...] = (50, 50)
    activation: str = "relu"
    dropout: float = 0.1
    lr: float = 1e-2
    weight_decay: float = 1e-4
    batch_size: int = 64
    max_epochs: int = 300
    patience: int = 20
    n_samples: int = 100
    validation_samples: int = 20
    fits_on_base: ClassVar[bool] = False

    def __post_init__(self) -> None:
        require_choice("method.activation", self.activation, ACTIVATIONS)
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"method.dropout={self.dropout!r} is not valid; it must be in "
                              "[0, 1)")
        if self.weight_decay < 0:
            raise ConfigError(f"method.weight_decay={self.weight_decay!r} is not valid; it must "
                              "be >= 0")
        for key in ("lr", "batch_size", "max_epochs", "patience", "n_samples",
                    "validation_samples"):
            require_positive(f"method.{key}", getattr(self, key))

    def fit(self, data: RegressionSplits, seed: int, base: Any = None) -> dict[str, Any]:
        """Train the dropout network on the training part, stopping on the validation part's
        MC-dropout NLL; returns epochs, best epoch, best validation NLL, parameters, seconds."""
        if len(data.y_val) == 0:
            raise ConfigError("method=MCDropout stops early on the validation part, and the "
                              "dataset's validation part is empty; give the dataset a "
                              "validation split")
        watch = Stopwatch()
        self.shape = MLPShape((data.n_features, *self.n_hidden, 2), self.activation)
        self.seed = int(seed)
        generator = make_generator(derived_seed([self.seed, INIT_STREAM]))
        theta = init_parameters(self.shape, generator).requires_grad_(True)
        train_masks = make_generator(derived_seed([self.seed, TRAIN_MASK_STREAM]))
        x, y = data.x_train.float(), data.y_train[:, 0].float()
        x_val, y_val = data.x_val.float(), data.y_val[:, 0].float()

        def batch_loss(rows) -> Tensor:
            output = self.masked_forward(theta, x[rows], train_masks)
            return gaussian_nll(output, y[rows])

        def validation() -> Tensor:
            masks = make_generator(derived_seed([self.seed, VALIDATION_MASK_STREAM]))
            predictive = self._predictive(theta, x_val, self.validation_samples, masks)
            return -torch.distributions.Normal(
                predictive.mean, predictive.variance.sqrt()).log_prob(y_val).mean()

        config = TrainingConfig(lr=self.lr, max_epochs=self.max_epochs,
                                batch_size=self.batch_size, weight_decay=self.weight_decay,
                                patience=self.patience)
        history = fit_parameters([theta], batch_loss, n_rows=len(y), config=config,
                                 generator=generator, validation=validation,
                                 desc="MC dropout")
        self.theta = theta.detach()
        return {"epochs": history.epochs, "best_epoch": history.best_epoch,
                "val_nll": history.best_validation, "n_parameters": self.shape.n_params,
                "fit_s": watch.elapsed()}

    def masked_forward(self, theta: Tensor, x: Tensor, generator: torch.Generator) -> Tensor:
        """Outputs ``[n, 2]`` with a fresh dropout mask on every hidden layer's output."""
        layers = self.shape.unflatten(theta)
        h = x
        for (weight, bias), activation in zip(layers[:-1], self.shape.activations, strict=True):
            h = ACTIVATIONS[activation].function(h @ weight.T + bias)
            if self.dropout > 0:
                kept = torch.rand(h.shape, generator=generator) >= self.dropout
                h = h * kept / (1.0 - self.dropout)
        weight, bias = layers[-1]
        return h @ weight.T + bias

    def _predictive(self, theta: Tensor, x: Tensor, n_samples: int,
                    generator: torch.Generator) -> Gaussian:
        outputs = torch.stack([self.masked_forward(theta, x, generator)
                               for _ in range(n_samples)])
        return moment_matched(outputs[..., 0], outputs[..., 1].exp())

    def predict(self, x: Tensor) -> Gaussian:
        """The moment-matched Gaussian of ``n_samples`` masked passes at ``x`` (the same
        masks at every call: their stream is derived from the fit's seed)."""
        masks = make_generator(derived_seed([self.seed, PREDICTION_MASK_STREAM]))
        with torch.no_grad():
            return self._predictive(self.theta, x.float(), self.n_samples, masks)
