"""Training the base network behind the Laplace-family methods, in the two protocols.

``protocol=paper``: the authors' base model exactly (notes §6): Lightning-UQ-Box's MLP with
MSE inside ``DeterministicRegression``, Adam, a Lightning Trainer with early stopping on the
validation loss and the last epoch's weights kept. Reproducing their network bit for bit needs
their draw order, so :func:`train_paper_mlp` seeds the global RNGs with ``seed_everything``
(what their service did) and builds the network twice (their service built it in the
constructor and again when loading the tuned hyperparameters). By default it trains in the
project's loop with Lightning's step order and RNG draws (same weights, no per-step Trainer
overhead); ``loop="lightning"`` runs the Trainer itself, the oracle the tests compare with.

``protocol=corrected``: what the paper's text says: a Gaussian likelihood with a fitted noise
scale and the N(0, 1/tau) prior, trained to the MAP on flat parameters by
:func:`bench.training.loop.fit_parameters` (no per-step framework overhead), best validation
NLL restored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor

from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import require_choice
from bench.harness.logs import quiet_lightning
from bench.harness.timing import Stopwatch
from bench.models.activations import ACTIVATIONS
from bench.models.mlp import MLPShape, flat_parameters, init_parameters, shape_of
from bench.training.lightning_like import fit_like_lightning
from bench.training.loop import TrainingConfig, fit_parameters


@dataclass
class TrainedNetwork:
    """theta-hat of a single-output regression MLP, its noise variance and prior precision."""

    shape: MLPShape
    theta: Tensor
    noise_variance: float
    prior_precision: float
    diagnostics: dict = field(default_factory=dict)

    def predict(self, x: Tensor) -> Tensor:
        """Plug-in predictions ``[n]``."""
        with torch.no_grad():
            return self.shape.forward_1d(self.theta, x.to(self.theta))

    def module(self) -> torch.nn.Module:
        """An ``nn.Sequential`` holding theta-hat (for libraries such as laplace-torch)."""
        return self.shape.module(self.theta)




def train_paper_mlp(
    splits: RegressionSplits, *, seed: int, lr: float, batch_size: int,
    n_hidden: tuple[int, ...] = (50, 50), activation: str = "relu",
    max_epochs: int = 500, patience: int = 20, loop: str = "fast",
) -> TrainedNetwork:
    """The authors' base MLP: MSE, Adam(lr), early stopping on the validation loss.

    ``loop="lightning"`` runs their Lightning Trainer (the oracle); ``loop="fast"`` runs the
    same training in :func:`bench.training.loop.fit_parameters` without Lightning's per-step
    machinery (:func:`_fit_like_lightning`), to the same weights bit for bit.
    """
    from lightning.pytorch import seed_everything
    from lightning_uq_box.models import MLP

    from bench.datasets.datamodule import TensorDataModule

    fit = PAPER_LOOPS[require_choice("base.loop", loop, PAPER_LOOPS)]
    act = ACTIVATIONS[require_choice("base.activation", activation, ACTIVATIONS)].module
    watch = Stopwatch()
    seed_everything(seed, verbose=False)
    network = None
    for _ in range(2):
        network = MLP(n_inputs=splits.n_features, n_hidden=list(n_hidden), n_outputs=1,
                      activation_fn=act())
    optimizer = partial(torch.optim.Adam, lr=lr)
    datamodule = splits.datamodule or TensorDataModule(splits)
    datamodule.batch_size = batch_size
    epochs = fit(network, datamodule, optimizer, max_epochs=max_epochs, patience=patience)
    network.eval()
    shape = shape_of(network, activation)
    theta = flat_parameters(network)
    residual = shape.forward_1d(theta, splits.x_train) - splits.y_train[:, 0]
    return TrainedNetwork(
        shape, theta, noise_variance=0.5, prior_precision=1.0,
        diagnostics={"epochs": epochs, "train_s": watch.elapsed(),
                     "train_mse": float((residual**2).mean())},
    )


def _fit_with_lightning(network: torch.nn.Module, datamodule, optimizer: partial, *,
                        max_epochs: int, patience: int) -> int:
    """Lightning-UQ-Box's ``DeterministicRegression`` (MSE) under a Lightning Trainer with
    ``EarlyStopping(monitor="val_loss", patience)``, as the authors ran it; epochs run."""
    import lightning as L
    from lightning.pytorch.callbacks import EarlyStopping
    from lightning_uq_box.uq_methods import DeterministicRegression

    module = DeterministicRegression(model=network, loss_fn=torch.nn.MSELoss(),
                                     optimizer=optimizer)
    with quiet_lightning():
        trainer = L.Trainer(
            max_epochs=max_epochs, logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, deterministic=True,
            callbacks=[EarlyStopping(monitor="val_loss", patience=patience)],
        )
        trainer.fit(module, datamodule=datamodule)
    return int(trainer.current_epoch)


def _fit_like_lightning(network: torch.nn.Module, datamodule, optimizer: partial, *,
                        max_epochs: int, patience: int) -> int:
    """What :func:`_fit_with_lightning` does, step for step, without the Trainer
    (:func:`bench.training.lightning_like.fit_like_lightning`): Adam steps on the batch MSE in
    the Trainer's batch order and RNG draws, ``val_loss`` and early stopping as Lightning
    computes them, the last epoch's weights kept. Returns the epochs run."""
    loss_fn = torch.nn.MSELoss()

    def batch_loss(batch: dict[str, Tensor]) -> Tensor:
        return loss_fn(network(batch["input"]), batch["target"])

    history = fit_like_lightning(network, batch_loss, datamodule,
                                 optimizer(network.parameters()), max_epochs=max_epochs,
                                 patience=patience, desc="paper MLP")
    return history.epochs


# The training loops of the authors' base MLP by ``base.loop``: the project's (fast) or
# Lightning's Trainer (the oracle).
PAPER_LOOPS = {"fast": _fit_like_lightning, "lightning": _fit_with_lightning}


def train_map_mlp(
    splits: RegressionSplits, *, seed: int, lr: float = 1e-2, batch_size: int = 64,
    n_hidden: tuple[int, ...] = (50, 50), activation: str = "relu",
    prior_precision: float = 1.0, max_epochs: int = 2000, patience: int = 50,
    dtype: torch.dtype = torch.float64, polish_rounds: int = 0,
) -> TrainedNetwork:
    """MAP under y ~ N(f(x), sigma^2), theta ~ N(0, I/tau), sigma fitted jointly.

    Minimises the per-point negative log joint ``[sum_i NLL_i + tau/2 |theta|^2] / n`` with
    Adam on minibatches drawn from a generator seeded by ``seed``; keeps the parameters of
    the epoch with the best validation NLL; sigma^2 is the training MSE there.
    ``polish_rounds > 0`` then makes theta-hat a stationary point of the training log joint
    for that sigma^2, which every Laplace method assumes and early stopping does not give
    (full-batch L-BFGS, :func:`polish_map`). Smooth activations reach a
    stationary point; ReLU's kinks stop L-BFGS near one (gradient norm 456 -> 11 on the
    Table 2 toy at seed 42).
    """
    watch = Stopwatch()
    generator = torch.Generator().manual_seed(int(seed))
    shape = MLPShape((splits.n_features, *n_hidden, 1), activation)
    x, y = splits.x_train.to(dtype), splits.y_train[:, 0].to(dtype)
    x_val, y_val = splits.x_val.to(dtype), splits.y_val[:, 0].to(dtype)
    theta = init_parameters(shape, generator, dtype).requires_grad_(True)
    log_sigma = torch.zeros((), dtype=dtype, requires_grad=True)
    n = len(y)

    def mean_nll(inputs: Tensor, targets: Tensor) -> Tensor:
        residual = shape.forward_1d(theta, inputs) - targets
        return (0.5 * residual**2 * torch.exp(-2 * log_sigma) + log_sigma).mean()

    config = TrainingConfig(lr=lr, max_epochs=max_epochs, batch_size=batch_size,
                            patience=patience)
    history = fit_parameters(
        [theta, log_sigma], n_rows=n, config=config, generator=generator, desc="MAP MLP",
        batch_loss=lambda rows: (mean_nll(x[rows], y[rows])
                                 + 0.5 * prior_precision * theta.pow(2).sum() / n),
        validation=lambda: mean_nll(x_val, y_val))
    theta_hat = theta.detach()
    with torch.no_grad():
        train_mse = float(((shape.forward_1d(theta_hat, x) - y) ** 2).mean())
    diagnostics = {"epochs": history.epochs, "best_epoch": history.best_epoch,
                   "val_nll": history.best_validation,
                   "sigma_at_best": math.exp(log_sigma.item()), "train_mse": train_mse}
    if polish_rounds > 0:
        diagnostics["grad_norm_before_polish"] = float(
            log_joint_gradient(shape, theta_hat, x, y, train_mse, prior_precision).norm())
        theta_hat = polish_map(shape, theta_hat, x, y, train_mse, prior_precision,
                               polish_rounds)
        diagnostics["grad_norm_after_polish"] = float(
            log_joint_gradient(shape, theta_hat, x, y, train_mse, prior_precision).norm())
        with torch.no_grad():
            diagnostics["train_mse_after_polish"] = float(
                ((shape.forward_1d(theta_hat, x) - y) ** 2).mean())
    diagnostics["train_s"] = watch.elapsed()
    return TrainedNetwork(shape, theta_hat, noise_variance=train_mse,
                          prior_precision=prior_precision, diagnostics=diagnostics)


def log_joint_gradient(shape: MLPShape, theta: Tensor, x: Tensor, y: Tensor,
                       noise_variance: float, prior_precision: float) -> Tensor:
    """Gradient in theta of ``sum_i log N(y_i; f(x_i), sigma^2) + log N(theta; 0, I/tau)``."""
    theta = theta.detach().requires_grad_(True)
    residual = shape.forward_1d(theta, x) - y
    value = -(residual**2).sum() / (2 * noise_variance) - 0.5 * prior_precision * theta.pow(2).sum()
    return torch.autograd.grad(value, theta)[0]


def polish_map(shape: MLPShape, theta: Tensor, x: Tensor, y: Tensor, noise_variance: float,
               prior_precision: float, rounds: int, max_iter: int = 500) -> Tensor:
    """Full-batch L-BFGS (strong Wolfe) to the MAP of theta for fixed sigma^2 and tau.

    ``rounds`` restarts of at most ``max_iter`` iterations each. sigma^2 stays at the
    early-stopped estimate: re-estimating it as the training MSE at the MAP collapses it
    towards 0 whenever the network can interpolate (p >> n). Deterministic.
    """
    theta = theta.detach().clone()
    for _ in range(rounds):
        theta.requires_grad_(True)
        optimizer = torch.optim.LBFGS([theta], lr=1, max_iter=max_iter, history_size=50,
                                      tolerance_grad=1e-9, tolerance_change=1e-15,
                                      line_search_fn="strong_wolfe")

        def closure(theta=theta, optimizer=optimizer):
            optimizer.zero_grad()
            residual = shape.forward_1d(theta, x) - y
            loss = ((residual**2).sum() / (2 * noise_variance)
                    + 0.5 * prior_precision * theta.pow(2).sum()) / len(y)
            loss.backward()
            return loss

        optimizer.step(closure)
        theta = theta.detach()
    return theta
