"""How many Adam updates the LA's tuned prior precision reflects, per protocol.

The SSLA authors tuned through lightning-uq-box 0.2.0's ``tune_prior_precision_and_sigma``
(the oracle here): every step writes the current value into the Laplace object before updating
it, so the value the LA predicts with reflects ``steps - 1`` updates. ``protocol=paper`` keeps
that value, ``protocol=corrected`` the value after every update.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from bench.datasets.regression_splits import RegressionSplits
from bench.methods.laplace.laplace_torch import LaplaceTorchMethod, tune_by_marginal_likelihood
from bench.models.mlp import MLPShape, init_parameters
from bench.training.regression_network import TrainedNetwork

CONF = Path(__file__).resolve().parents[3] / "conf"


def _tiny_problem(dtype: torch.dtype, seed: int = 3):
    """A 2-8-1 ReLU network (random weights) and 30 noisy training points of a smooth curve."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(40, 2, generator=g, dtype=dtype)
    y = (torch.sin(x[:, :1]) + 0.5 * x[:, 1:] + 0.3 * torch.randn(40, 1, generator=g,
                                                                      dtype=dtype))
    splits = RegressionSplits(x[:30], y[:30], x[30:35], y[30:35], x[35:], y[35:])
    shape = MLPShape((2, 8, 1))
    base = TrainedNetwork(shape, init_parameters(shape, g, dtype), noise_variance=0.4,
                          prior_precision=5.0)
    return splits, base


def _fitted_laplace(splits: RegressionSplits, base: TrainedNetwork, structure: str,
                    sigma_noise: float = 1.0, prior_precision: float = 1.0):
    """laplace-torch's last-layer Laplace fitted as the authors' ``la()`` helper fits it."""
    from laplace import Laplace
    from torch.utils.data import DataLoader, TensorDataset

    la = Laplace(base.module(), "regression", subset_of_weights="last_layer",
                 hessian_structure=structure, sigma_noise=sigma_noise,
                 prior_precision=prior_precision)
    la.fit(DataLoader(TensorDataset(splits.x_train, splits.y_train), batch_size=64))
    return la


def _textbook_adam(gradient, start: list[float], lr: float, steps: int,
                   betas=(0.9, 0.999), eps=1e-8) -> list[list[float]]:
    """Kingma & Ba's Adam written out; the iterates after 0, 1, ..., ``steps`` updates."""
    theta, m, v = list(start), [0.0] * len(start), [0.0] * len(start)
    path = [list(theta)]
    for t in range(1, steps + 1):
        g = gradient(theta)
        for i, gi in enumerate(g):
            m[i] = betas[0] * m[i] + (1 - betas[0]) * gi
            v[i] = betas[1] * v[i] + (1 - betas[1]) * gi * gi
            m_hat, v_hat = m[i] / (1 - betas[0] ** t), v[i] / (1 - betas[1] ** t)
            theta[i] -= lr * m_hat / (math.sqrt(v_hat) + eps)
        path.append(list(theta))
    return path


def _neg_marglik_gradient(la, tune_sigma: bool, fixed_log_sigma: float):
    """Gradient of -log marglik of ``la`` in (log tau[, log sigma]), in float64."""
    def gradient(theta: list[float]) -> list[float]:
        log_prior = torch.tensor([theta[0]], dtype=torch.float64, requires_grad=True)
        log_sigma = torch.tensor([theta[1] if tune_sigma else fixed_log_sigma],
                                 dtype=torch.float64, requires_grad=tune_sigma)
        loss = -la.log_marginal_likelihood(log_prior.exp(), log_sigma.exp())
        wrt = [log_prior, log_sigma] if tune_sigma else [log_prior]
        return [float(g) for g in torch.autograd.grad(loss, wrt)]
    return gradient


@pytest.mark.parametrize("structure", ["kron", "diag", "full"])
@pytest.mark.second_tier
def test_paper_protocol_prior_precision_equals_lightning_uq_box_loop(structure):
    from lightning_uq_box.uq_methods.laplace_model import tune_prior_precision_and_sigma

    splits, base = _tiny_problem(torch.float32)
    ours = LaplaceTorchMethod(hessian_structure=structure, protocol="paper", tune_steps=100,
                              tune_lr=1e-3)
    diagnostics = ours.fit(splits, 0, base)
    oracle = _fitted_laplace(splits, base, structure)
    tune_prior_precision_and_sigma(oracle, 1e-3, 100, True, False)
    assert math.isclose(diagnostics["prior_precision"], float(oracle.prior_precision.detach()),
                        rel_tol=1e-6)
    assert float(ours.la.sigma_noise) == float(oracle.sigma_noise) == 1.0
    assert diagnostics["tune_updates_kept"] == 99
    x = splits.x_test
    torch.testing.assert_close(ours.predict(x).variance,
                               oracle(x, pred_type="glm")[1].detach().reshape(-1) + 1.0,
                               rtol=1e-6, atol=0)


def test_paper_protocol_tuning_settings_are_lightning_uq_box_defaults():
    from lightning_uq_box.uq_methods import LaplaceRegression

    defaults = inspect.signature(LaplaceRegression.__init__).parameters
    paper = OmegaConf.load(CONF / "protocol" / "paper.yaml")
    assert paper.la_tune_steps == defaults["n_epochs_tuning"].default == 100
    assert paper.la_tune_lr == defaults["tuning_lr"].default == 1e-3
    assert defaults["tune_sigma_noise"].default is False


def test_paper_keeps_99_updates_and_corrected_all_100_by_hand():
    splits, base = _tiny_problem(torch.float64)
    steps = 100
    paper = LaplaceTorchMethod(hessian_structure="kron", protocol="paper", tune_steps=steps,
                               tune_lr=1e-3)
    paper_tau = paper.fit(splits, 0, base)["prior_precision"]
    gradient = _neg_marglik_gradient(_fitted_laplace(splits, base, "kron"), False, 0.0)
    path = _textbook_adam(gradient, [1.0], 1e-3, steps)
    assert math.isclose(paper_tau, math.exp(path[steps - 1][0]), rel_tol=1e-5)
    assert not math.isclose(paper_tau, math.exp(path[steps][0]), rel_tol=1e-4)

    corrected = LaplaceTorchMethod(hessian_structure="kron", protocol="corrected",
                                   tune_steps=steps, tune_lr=1e-2)
    fitted = corrected.fit(splits, 0, base)
    sigma0 = math.sqrt(base.noise_variance)
    la = _fitted_laplace(splits, base, "kron", sigma0, base.prior_precision)
    path = _textbook_adam(_neg_marglik_gradient(la, True, 0.0),
                          [math.log(base.prior_precision), math.log(sigma0)], 1e-2, steps)
    assert fitted["tune_updates_kept"] == steps
    assert math.isclose(fitted["prior_precision"], math.exp(path[steps][0]), rel_tol=1e-6)
    assert math.isclose(fitted["sigma_noise"], math.exp(path[steps][1]), rel_tol=1e-6)
    assert not math.isclose(fitted["prior_precision"], math.exp(path[steps - 1][0]),
                            rel_tol=1e-4)


def test_keeping_the_last_update_is_exactly_one_more_update():
    splits, base = _tiny_problem(torch.float64)

    def tuned(steps: int, keep_last_update: bool) -> tuple[float, float]:
        la = _fitted_laplace(splits, base, "diag", 0.8, 2.0)
        log_prior = torch.tensor([math.log(2.0)], dtype=torch.float64, requires_grad=True)
        log_sigma = torch.tensor([math.log(0.8)], dtype=torch.float64, requires_grad=True)
        tune_by_marginal_likelihood(la, log_prior, log_sigma, [log_prior, log_sigma],
                                    steps=steps, lr=0.05, keep_last_update=keep_last_update)
        assert not la.prior_precision.requires_grad and not la.sigma_noise.requires_grad
        return float(la.prior_precision), float(la.sigma_noise)

    assert tuned(20, keep_last_update=True) == tuned(21, keep_last_update=False)
    assert tuned(20, keep_last_update=True) != tuned(20, keep_last_update=False)
    assert tuned(0, keep_last_update=False) == tuned(0, keep_last_update=True) == (2.0, 0.8)
