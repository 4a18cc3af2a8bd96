"""Tuning objectives: ``objective(params, seed, **options) -> float`` (lower is better).

``params`` holds method field names (lr, batch_size, ...), ``seed`` sets the data and the
initialisation, ``options`` are the space's fixed settings. All data come from Lightning-UQ-Box's
``ToyHeteroscedasticDatamodule`` with its default ``test_fraction=0.2``: the SSLA authors tuned
on that split, not on the 0.1 split they evaluated on (notes §10.15), and the spaces keep it.

Library imports sit inside the functions, so this module imports without them (and the method
modules may be written after it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def mlp_objective(params: Mapping[str, Any], seed: int, *, test_fraction: float = 0.2,
                  max_epochs: int = 500, patience: int = 20,
                  n_hidden: Sequence[int] = (50, 50)) -> float:
    """The authors' base-MLP objective: the last epoch's validation MSE (notes §6).

    Trains a 1-50-50-1 ReLU MLP with MSE and Adam(``params["lr"]``) in minibatches of
    ``params["batch_size"]`` for at most ``max_epochs``, stopping early once the validation MSE
    has not improved for ``patience`` epochs (Lightning's EarlyStopping rule), and returns the
    last epoch's validation MSE, as the authors' objective did (not the best one).
    """
    import torch
    from lightning_uq_box.datamodules import ToyHeteroscedasticDatamodule

    dm = ToyHeteroscedasticDatamodule(test_fraction=test_fraction, noise_seed=seed,
                                      split_seed=seed)
    return last_val_mse(
        (dm.X_train, dm.Y_train), (dm.X_val, dm.Y_val), lr=float(params["lr"]),
        batch_size=int(params["batch_size"]), generator=torch.Generator().manual_seed(seed),
        max_epochs=max_epochs, patience=patience, n_hidden=n_hidden,
    )


def last_val_mse(train: tuple, val: tuple, *, lr: float, batch_size: int, generator,
                 max_epochs: int, patience: int, n_hidden: Sequence[int] = (50, 50)) -> float:
    """Train a ReLU MLP by minibatch Adam on MSE; the last epoch's validation MSE.

    ``generator`` (a ``torch.Generator``) draws the initial weights (PyTorch's default
    ``nn.Linear`` scheme) and the shuffling; the global RNGs are neither seeded nor used.
    A non-finite validation MSE stops training and is returned as it is.
    """
    from bench.models.mlp import MLPShape, init_parameters
    from bench.training.loop import TrainingConfig, fit_parameters

    x, y = (t.float() for t in train)
    x_val, y_val = (t.float() for t in val)
    shape = MLPShape((x.shape[1], *n_hidden, y.shape[1]), "relu")
    theta = init_parameters(shape, generator).requires_grad_(True)
    config = TrainingConfig(lr=lr, max_epochs=max_epochs, batch_size=batch_size,
                            patience=patience, restore_best=False)
    history = fit_parameters(
        [theta], lambda rows: (shape.forward(theta, x[rows]) - y[rows]).pow(2).mean(),
        n_rows=len(x), config=config, generator=generator, desc="MLP objective",
        validation=lambda: (shape.forward(theta, x_val) - y_val).pow(2).mean(),
    )
    return history.last_validation


def mfvi_objective(params: Mapping[str, Any], seed: int, *, test_fraction: float = 0.2,
                   fixed: Mapping[str, Any] | None = None) -> float:
    """Validation MSE of ``MFVIMethod(**params, **fixed)``'s predictive mean."""
    from bench.methods.baselines.vi import MFVIMethod

    return _val_mse(MFVIMethod(**params, **(fixed or {})), seed, test_fraction)


def alpha_vi_objective(params: Mapping[str, Any], seed: int, *, test_fraction: float = 0.2,
                       fixed: Mapping[str, Any] | None = None) -> float:
    """Validation MSE of ``AlphaVIMethod(**params, **fixed)``'s predictive mean."""
    from bench.methods.baselines.vi import AlphaVIMethod

    return _val_mse(AlphaVIMethod(**params, **(fixed or {})), seed, test_fraction)


def hmc_objective(params: Mapping[str, Any], seed: int, *, test_fraction: float = 0.2,
                  fixed: Mapping[str, Any] | None = None) -> float:
    """Minus the mean per-sample validation log-density of ``HMCMethod(**params, **fixed)``.

    As the authors' objective: for every kept sample s and validation point,
    log N(y; f_s(x), 1/tau_out), averaged over both (the normalising constant included).
    """
    import torch

    from bench.methods.baselines.hmc import HMCMethod

    method = HMCMethod(**params, **(fixed or {}))
    splits = _toy_splits(seed, test_fraction)
    method.fit(splits, seed)
    f = method.sample_predictions(splits.x_val).double()
    y = splits.y_val.reshape(-1).to(f)
    scale = torch.tensor(1.0 / method.tau_out, dtype=f.dtype).sqrt()
    return -float(torch.distributions.Normal(f, scale).log_prob(y).mean())


def _val_mse(method, seed: int, test_fraction: float) -> float:
    splits = _toy_splits(seed, test_fraction)
    method.fit(splits, seed)
    mean = method.predict(splits.x_val).mean.reshape(-1).double()
    return float(((mean - splits.y_val.reshape(-1).double()) ** 2).mean())


def _toy_splits(seed: int, test_fraction: float):
    from bench.datasets.toy import heteroscedastic_toy

    return heteroscedastic_toy(seed, n_points=250, test_fraction=test_fraction)
