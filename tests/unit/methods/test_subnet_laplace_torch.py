"""Subnetwork LLA against laplace-torch 0.3 on a tiny tanh/sigmoid network (float64); our
masks driving laplace-torch's ``SubnetLaplace``."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from bench.harness.rng import make_generator
from bench.methods.laplace import linearised as lla
from bench.methods.laplace.subnet_masks import GradientSubnetMask, GreedySubnetMask
from bench.methods.laplace.subnetwork import SubnetLaplaceMethod
from bench.methods.laplace.subset_selection import (
    gradient_subnet_indices,
    greedy_subnet_indices,
    subnet_diagonal_indices,
)
from bench.models.mlp import MLPShape
from bench.training.working_network import TrainedWorkingModel

laplace = pytest.importorskip("laplace")
from laplace.utils.subnetmask import LargestVarianceDiagLaplaceSubnetMask  # noqa: E402

TINY = MLPShape((3, 4, 3, 1), ("tanh", "sigmoid"))
NOISE_VARIANCE = 0.5


class BinaryAsTwoLogits(torch.nn.Module):
    """Logits ``(0, f)``: softmax cross-entropy on them is the Bernoulli likelihood of ``f``."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Two-class logits."""
        f = self.inner(x)
        return torch.cat([torch.zeros_like(f), f], dim=1)


@pytest.fixture(scope="module")
def problem():
    """theta, training inputs/targets and test inputs of the tiny network."""
    g = make_generator(1)
    theta = torch.randn(TINY.n_params, generator=g, dtype=torch.float64)
    x = torch.randn(12, 3, generator=g, dtype=torch.float64)
    y = torch.randn(12, 1, generator=g, dtype=torch.float64)
    x_test = torch.randn(5, 3, generator=g, dtype=torch.float64)
    return theta, x, y, x_test


def fitted(model, likelihood, loader, **kwargs):
    """A laplace-torch Laplace object fitted on ``loader``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        la = laplace.Laplace(model, likelihood, prior_precision=1.0, **kwargs)
        la.fit(loader)
    return la


def test_full_lla_matches_laplace_torch_glm_predictive(problem):
    theta, x, y, x_test = problem
    ours = lla.fit_linearised_laplace(TINY, theta, x, "regression", NOISE_VARIANCE)
    la = fitted(TINY.module(theta), "regression", DataLoader(TensorDataset(x, y), batch_size=4),
                subset_of_weights="all", hessian_structure="full",
                sigma_noise=NOISE_VARIANCE**0.5)
    torch.testing.assert_close(la.posterior_precision, ours.omega)
    f_mean, f_var = la(x_test, pred_type="glm")
    function = ours.function_predictive(x_test)
    torch.testing.assert_close(f_mean.flatten(), function.mean)
    torch.testing.assert_close(f_var.flatten(), function.variance)


def test_subnetwork_variance_matches_laplace_torch_subnet_laplace(problem):
    theta, x, y, x_test = problem
    ours = lla.fit_linearised_laplace(TINY, theta, x, "regression", NOISE_VARIANCE)
    subset = torch.tensor([0, 5, 7, 20, TINY.n_params - 1])
    la = fitted(TINY.module(theta), "regression", DataLoader(TensorDataset(x, y), batch_size=4),
                subset_of_weights="subnetwork", hessian_structure="full",
                subnetwork_indices=subset, sigma_noise=NOISE_VARIANCE**0.5)
    _, f_var = la(x_test, pred_type="glm")
    surrogate = lla.subnetwork_covariance(ours.omega, subset)
    expected = ours.function_predictive(x_test, surrogate).variance
    torch.testing.assert_close(f_var.flatten(), expected)


@pytest.mark.parametrize("mask_class", [GreedySubnetMask, GradientSubnetMask])
def test_our_mask_drives_laplace_torch_subnet_laplace(problem, mask_class):
    """The mask selects on laplace-torch's own precision (Greedy) or autograd Jacobians
    (Gradient) from the loader; SubnetLaplace (full Hessian on the subnetwork) on its indices
    gives the variance of our linearised subnetwork covariance and of SubnetLaplaceMethod."""
    theta, x, y, x_test = problem
    k = 6
    ours = lla.fit_linearised_laplace(TINY, theta, x, "regression", NOISE_VARIANCE)
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    module = TINY.module(theta)
    mask = mask_class(module, k, likelihood="regression", sigma_noise=NOISE_VARIANCE**0.5,
                      prior_precision=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        indices = mask.select(loader)
    if mask_class is GreedySubnetMask:
        order = greedy_subnet_indices(ours.omega, k)
    else:
        order = gradient_subnet_indices(ours.jacobians(x), k)
    assert indices.tolist() == sorted(order.tolist())
    la = fitted(module, "regression", loader, subset_of_weights="subnetwork",
                hessian_structure="full", subnetwork_indices=indices,
                sigma_noise=NOISE_VARIANCE**0.5)
    _, f_var = la(x_test, pred_type="glm")
    expected = ours.function_predictive(x_test, lla.subnetwork_covariance(ours.omega, order))
    torch.testing.assert_close(f_var.flatten(), expected.variance)
    method = SubnetLaplaceMethod(mask=mask_class, n_params_subnet=k,
                                 noise_variance=NOISE_VARIANCE)
    base = TrainedWorkingModel(TINY, theta, x, y[:, 0], x[:0], y[:0, 0])
    method.fit(SimpleNamespace(likelihood="regression"), 0, base=base)
    torch.testing.assert_close(method.predict(x_test).variance,
                               f_var.flatten() + NOISE_VARIANCE)


def test_subnet_diagonal_matches_largest_variance_diag_laplace_mask(problem):
    theta, x, y, _ = problem
    ours = lla.fit_linearised_laplace(TINY, theta, x, "regression", NOISE_VARIANCE)
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    diag = laplace.Laplace(TINY.module(theta), "regression", subset_of_weights="all",
                           hessian_structure="diag", sigma_noise=NOISE_VARIANCE**0.5,
                           prior_precision=1.0)
    mask = LargestVarianceDiagLaplaceSubnetMask(TINY.module(theta), 6, diag)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = mask.select(loader)
    assert sorted(theirs.tolist()) == sorted(subnet_diagonal_indices(ours.omega, 6).tolist())


def test_classification_precision_matches_laplace_torch(problem):
    theta, x, _, _ = problem
    labels = (torch.rand(12, generator=make_generator(2)) < 0.5).long()
    ours = lla.fit_linearised_laplace(TINY, theta, x, "classification")
    la = fitted(BinaryAsTwoLogits(TINY.module(theta)), "classification",
                DataLoader(TensorDataset(x, labels), batch_size=4),
                subset_of_weights="all", hessian_structure="full")
    torch.testing.assert_close(la.posterior_precision, ours.omega)
