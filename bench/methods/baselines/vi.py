"""Lightning-UQ-Box's variational BNNs as adapters: MFVI (ELBO) and alpha-divergence VI.

Both replay the SSLA authors' runs draw for draw (notes §6): ``seed_everything(seed)``, the
network and UQ module built twice (their service built them in its constructor and again when
loading the tuned hyperparameters, so the trained weights are the second draw), then a
Lightning Trainer with the tuned batch size, ``deterministic=True`` and early stopping on the
validation loss (patience 20, last epoch's weights kept). The defaults are their tuned
hyperparameters for the heteroscedastic toy (Table 2). ``loop="fast"`` (default) runs that
training in the project's loop with the Trainer's step order and RNG draws, to the same weights
bit for bit without its per-step overhead; ``loop="lightning"`` runs the Trainer itself, the
oracle ``tests/unit/methods/test_vi_fast_loop.py`` compares with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

import lightning as L
import torch
from lightning.pytorch import seed_everything
from lightning.pytorch.callbacks import EarlyStopping
from torch import Tensor, nn

from bench.datasets.datamodule import TensorDataModule
from bench.datasets.regression_splits import RegressionSplits
from bench.harness.errors import ConfigError, require_choice, require_positive
from bench.harness.logs import quiet_lightning
from bench.harness.timing import Stopwatch
from bench.models.activations import ACTIVATIONS
from bench.predictive.densities import Gaussian
from bench.training.lightning_like import TrainerStandIn, fit_like_lightning, stopped_early

VI_LOOPS = ("fast", "lightning")


class _LightningUQVI:
    """Shared fit/predict of the two VI adapters; subclasses say how to build the module."""

    n_hidden: tuple[int, ...]
    activation: str
    batch_size: int
    max_epochs: int
    patience: int
    accelerator: str
    loop: str
    n_outputs: int
    lr: float
    output_noise_scale: float
    prior_mu: float
    prior_sigma: float
    posterior_mu_init: float
    posterior_rho_init: float
    fits_on_base: ClassVar[bool] = False

    def __post_init__(self) -> None:
        require_choice("method.activation", self.activation, ACTIVATIONS)
        self.fit_loop = {"fast": self._fit_like_lightning, "lightning": self._fit_with_lightning}[
            require_choice("method.loop", self.loop, VI_LOOPS)]
        if self.loop == "fast" and self.accelerator != "cpu":
            raise ConfigError(f"method.loop=fast trains on the CPU; method.accelerator="
                              f"{self.accelerator!r} needs method.loop=lightning")
        for key in ("batch_size", "max_epochs", "patience", "lr"):
            require_positive(f"method.{key}", getattr(self, key))

    def _network(self, n_inputs: int) -> nn.Module:
        """Lightning-UQ-Box's MLP with this method's widths and activation."""
        from lightning_uq_box.models import MLP

        return MLP(n_inputs=n_inputs, n_hidden=list(self.n_hidden), n_outputs=self.n_outputs,
                   activation_fn=ACTIVATIONS[self.activation].module())

    def _module(self, n_inputs: int) -> L.LightningModule:
        """The network, its parameter count stored, wrapped in the library's UQ module with
        the keywords both adapters pass alike (Adam at ``lr``, the prior and posterior init,
        the last layer Bayesian by reparameterization) and the subclass's own."""
        network = self._network(n_inputs)
        self.n_network_parameters = sum(p.numel() for p in network.parameters())
        return self._uq_module(
            network, optimizer=partial(torch.optim.Adam, lr=self.lr),
            output_noise_scale=self.output_noise_scale, prior_mu=self.prior_mu,
            prior_sigma=self.prior_sigma, posterior_mu_init=self.posterior_mu_init,
            posterior_rho_init=self.posterior_rho_init,
            bayesian_layer_type="reparameterization", stochastic_module_names=[-1],
        )

    def _uq_module(self, network: nn.Module, **shared: Any) -> L.LightningModule:
        """The subclass's Lightning-UQ-Box module of ``network`` with the ``shared`` keywords."""
        raise NotImplementedError

    def fit(self, data: RegressionSplits, seed: int, base=None) -> dict[str, Any]:
        """Seed globally, build the module twice, train as a Lightning Trainer does (no base).

        ``seed_everything(seed)`` seeds torch, numpy and Python's global RNGs: the library
        draws initial weights, minibatch order and Monte Carlo samples from them, so global
        seeding here (inside ``fit``, never in a constructor) is what reproduces the authors'
        draws. ``loop="lightning"`` runs their Trainer (the oracle); ``loop="fast"`` the same
        training in the project's loop (:func:`bench.training.lightning_like.fit_like_lightning`),
        to the same weights and RNG state bit for bit. The datamodule's batch size (and, for
        the Trainer, torch's deterministic-algorithms flag) are restored afterwards. Returns
        epochs trained, final and best validation loss, parameter counts and wall time.
        """
        watch = Stopwatch()
        datamodule = data.datamodule or TensorDataModule(data)
        batch_size = getattr(datamodule, "batch_size", None)
        with quiet_lightning():
            seed_everything(seed, verbose=False)
            for _ in range(2):
                module = self._module(data.n_features)
            datamodule.batch_size = self.batch_size
            try:
                diagnostics = self.fit_loop(module, datamodule)
            finally:
                datamodule.batch_size = batch_size
        self.module = module.cpu()
        self.predict_rng_state = torch.get_rng_state()
        return {
            **diagnostics,
            "n_network_parameters": self.n_network_parameters,
            "n_trainable_parameters": sum(p.numel() for p in module.parameters()
                                          if p.requires_grad),
            "fit_s": watch.elapsed(),
        }

    def _fit_with_lightning(self, module: L.LightningModule, datamodule) -> dict[str, Any]:
        """The authors' Trainer: ``deterministic=True``, ``EarlyStopping(val_loss, patience)``,
        last epoch's weights kept; torch's deterministic-algorithms flag restored after."""
        deterministic = (torch.are_deterministic_algorithms_enabled(),
                         torch.is_deterministic_algorithms_warn_only_enabled())
        early_stopping = EarlyStopping(monitor="val_loss", patience=self.patience)
        trainer = L.Trainer(
            max_epochs=self.max_epochs, accelerator=self.accelerator, deterministic=True,
            callbacks=[early_stopping], logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False,
        )
        try:
            trainer.fit(module, datamodule=datamodule)
        finally:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        return {
            "epochs": int(trainer.current_epoch),
            "stopped_early": bool(early_stopping.stopped_epoch),
            "val_loss": float(trainer.callback_metrics["val_loss"]),
            "best_val_loss": float(early_stopping.best_score),
        }

    def _fit_like_lightning(self, module: L.LightningModule, datamodule) -> dict[str, Any]:
        """The Trainer's training without the Trainer: the module's own ``on_fit_start``,
        ``configure_optimizers`` and loss (:meth:`_step_loss`, what its training and validation
        steps log), with a stand-in that tells it the datamodule and the epoch running."""
        trainer = TrainerStandIn(datamodule)
        module.trainer = trainer
        try:
            module.on_fit_start()
            history = fit_like_lightning(
                module, partial(self._step_loss, module), datamodule,
                module.configure_optimizers()["optimizer"], max_epochs=self.max_epochs,
                patience=self.patience, desc=self.name, trainer=trainer)
        finally:
            module.trainer = None
        return {
            "epochs": history.epochs,
            "stopped_early": stopped_early(history, self.patience),
            "val_loss": history.last_validation,
            "best_val_loss": history.best_validation,
        }

    @staticmethod
    def _step_loss(module: L.LightningModule, batch: dict[str, Tensor]) -> Tensor:
        """The loss the module's ``training_step`` returns and ``validation_step`` logs."""
        raise NotImplementedError

    def predict(self, x: Tensor) -> Gaussian:
        """Gaussian(mean=pred, variance=pred_uct**2) from the module's ``predict_step``.

        Monte Carlo draws start from the global torch RNG state saved at the end of ``fit``
        (as when the authors predicted right after training), on a forked RNG: predictions
        are the same on every call and the caller's global RNG is left untouched.
        """
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self.predict_rng_state)
            out = self.module.predict_step(x.to(torch.float32))
        std = out["pred_uct"].reshape(-1)
        return Gaussian(mean=out["pred"].reshape(-1), variance=std**2)


@dataclass
class MFVIMethod(_LightningUQVI):
    """Mean-field VI (Bayes by Backprop), ``BNN_VI_ELBO_Regression``, last layer Bayesian.

    The network outputs mean and log-variance (NLL after ``burnin_epochs`` of MSE); the loss is
    ``N_train * mean_MC(NLL) + beta * KL`` with ``beta`` the number of network parameters when
    left as None. ``output_noise_scale`` is passed on as the authors did; the library stores it
    but does not use it.
    """

    name: str = "mfvi"
    n_hidden: tuple[int, ...] = (50, 50)
    activation: str = "relu"
    lr: float = 0.03632604660213877
    batch_size: int = 265
    burnin_epochs: int = 121
    num_mc_samples_train: int = 7
    num_mc_samples_test: int = 57
    output_noise_scale: float = 0.5418165440069375
    beta: float | None = None
    prior_mu: float = 0.0
    prior_sigma: float = 1.0
    posterior_mu_init: float = 0.0
    posterior_rho_init: float = -5.0
    max_epochs: int = 500
    patience: int = 20
    accelerator: str = "cpu"
    loop: str = "fast"
    n_outputs: int = field(default=2, init=False, repr=False)

    def _uq_module(self, network: nn.Module, **shared: Any) -> L.LightningModule:
        """``BNN_VI_ELBO_Regression`` with the NLL criterion, burn-in, beta and MC samples."""
        from lightning_uq_box.uq_methods import NLL, BNN_VI_ELBO_Regression

        return BNN_VI_ELBO_Regression(
            network, criterion=NLL(), burnin_epochs=self.burnin_epochs,
            beta=self.n_network_parameters if self.beta is None else self.beta,
            num_mc_samples_train=self.num_mc_samples_train,
            num_mc_samples_test=self.num_mc_samples_test, **shared,
        )

    @staticmethod
    def _step_loss(module: L.LightningModule, batch: dict[str, Tensor]) -> Tensor:
        """The negative beta-ELBO (MSE before ``burnin_epochs``, read from the module's
        ``current_epoch``)."""
        return module.compute_elbo_loss(batch["input"], batch["target"])[0]


@dataclass
class AlphaVIMethod(_LightningUQVI):
    """Alpha-divergence VI (Depeweg et al.), ``BNN_VI_Regression``, last layer Bayesian.

    One output with a learned homoscedastic noise (log std initialised at -2.5); trained on
    the energy alpha-divergence. The predictive std is sqrt(Var_MC f + noise std^2).
    ``output_noise_scale`` is passed on as the authors did; the library does not use it.
    """

    name: str = "vi"
    n_hidden: tuple[int, ...] = (50, 50)
    activation: str = "tanh"
    lr: float = 0.04772281177306119
    batch_size: int = 16
    n_mc_samples_train: int = 7
    n_mc_samples_test: int = 72
    output_noise_scale: float = 1.7756366736905622
    alpha: float = 0.46401413257920965
    prior_mu: float = 0.0
    prior_sigma: float = 1.0
    posterior_mu_init: float = 0.0
    posterior_rho_init: float = -6.0
    max_epochs: int = 500
    patience: int = 20
    accelerator: str = "cpu"
    loop: str = "fast"
    n_outputs: int = field(default=1, init=False, repr=False)

    def _uq_module(self, network: nn.Module, **shared: Any) -> L.LightningModule:
        """``BNN_VI_Regression`` with its MC samples and ``alpha``."""
        from lightning_uq_box.uq_methods import BNN_VI_Regression

        return BNN_VI_Regression(
            network, n_mc_samples_train=self.n_mc_samples_train,
            n_mc_samples_test=self.n_mc_samples_test, alpha=self.alpha, **shared,
        )

    @staticmethod
    def _step_loss(module: L.LightningModule, batch: dict[str, Tensor]) -> Tensor:
        """The energy alpha-divergence loss."""
        return module.compute_energy_loss(batch["input"], batch["target"])[0]
