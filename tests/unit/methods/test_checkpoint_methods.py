"""Figure 10's post-hoc pieces: temperature scaling against its closed form and a grid, the
noise sd against its maximum-likelihood value and torch's Gaussian NLL, and last-layer Laplace
on the last layer's inputs against laplace-torch on the whole network."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.baselines.gaussian_noise import fit_noise_sd, gaussian_nll
from bench.methods.baselines.temperature_scaling import fit_temperature, temperature_nll
from bench.methods.laplace.last_layer_checkpoint import CheckpointLastLayerLaplace, head_laplace
from bench.models.wilds_networks import build_network, features_and_outputs


@pytest.mark.parametrize("margin, share", [(3.0, 0.8), (0.5, 0.9), (6.0, 0.6)])
def test_temperature_matches_the_two_class_closed_form(margin, share):
    # Every point has logits (margin, 0) and a share of them are class 0: the NLL is minimal
    # where sigmoid(margin / T) = share, i.e. T = margin / logit(share).
    n = 1000
    logits = torch.tensor([[margin, 0.0]]).repeat(n, 1)
    labels = (torch.arange(n) >= round(share * n)).long()
    expected = margin / math.log(share / (1 - share))
    assert fit_temperature(logits, labels) == pytest.approx(expected, rel=1e-6)


@pytest.mark.second_tier
def test_temperature_is_the_minimum_over_a_dense_grid():
    generator = make_generator(0)
    logits = 4.0 * torch.randn(300, 5, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 5, (300,), generator=generator)
    labels[:150] = logits[:150].argmax(dim=1)  # half right: over-confident logits
    fitted = fit_temperature(logits, labels)
    grid = torch.exp(torch.linspace(math.log(0.05), math.log(50.0), 20001, dtype=torch.float64))
    losses = torch.stack([temperature_nll(logits, labels, t) for t in grid])
    best = float(grid[int(losses.argmin())])
    assert fitted > 1.0
    assert fitted == pytest.approx(best, rel=1e-3)
    assert float(temperature_nll(logits, labels, fitted)) <= float(losses.min()) + 1e-12


def test_temperature_rejects_mismatched_inputs():
    with pytest.raises(ConfigError, match="logits"):
        fit_temperature(torch.zeros(3, 2), torch.zeros(4))


def test_noise_sd_nll_is_torch_gaussian_nll_and_converges_to_the_mle():
    generator = make_generator(1)
    mean = torch.randn(500, generator=generator, dtype=torch.float64)
    targets = mean + 0.3 * torch.randn(500, generator=generator, dtype=torch.float64)
    sd = torch.tensor(0.7, dtype=torch.float64)
    reference = nn.GaussianNLLLoss(full=True)(mean, targets, torch.full_like(mean, 0.49))
    assert float(gaussian_nll(mean, targets, sd)) == pytest.approx(float(reference), rel=1e-12)
    mle = float(((targets - mean) ** 2).mean().sqrt())
    assert fit_noise_sd(mean, targets, lr=0.05, epochs=400, batch_size=500) == pytest.approx(
        mle, rel=1e-4)
    # The paper's setting (10 epochs of batches of 64 from sigma = 1) gets most of the way.
    paper = fit_noise_sd(mean, targets)
    assert abs(paper - mle) < abs(1.0 - mle) / 2


def test_noise_sd_rejects_bad_settings():
    with pytest.raises(ConfigError, match="method.noise.epochs=0"):
        fit_noise_sd(torch.zeros(3), torch.zeros(3), epochs=0)


def small_problem(n_outputs: int, regression: bool = False):
    network = build_network("tiny_cnn", n_outputs, {"in_channels": 3, "width": 6},
                            generator=make_generator(4)).eval()
    generator = make_generator(5)
    x = torch.randn(40, 3, 6, 6, generator=generator)
    if regression:
        y = torch.randn(40, generator=generator)
    else:
        y = torch.randint(0, n_outputs, (40,), generator=generator)
    return network, x, y


def whole_network_laplace(network, x, y, likelihood, structure, prior):
    from laplace import Laplace
    from laplace.curvature import BackPackGGN

    options = {"sigma_noise": 1.0} if likelihood == "regression" else {}
    la = Laplace(network, likelihood, subset_of_weights="last_layer", last_layer_name="head",
                 hessian_structure=structure, prior_precision=prior, backend=BackPackGGN,
                 **options)
    targets = y.reshape(-1, 1) if likelihood == "regression" else y
    la.fit(DataLoader(TensorDataset(x, targets), batch_size=16))
    return la


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_last_layer_laplace_on_features_is_laplace_torch_on_the_whole_network(structure):
    network, x, y = small_problem(3)
    reference = whole_network_laplace(network, x, y, "classification", structure, 5.5)
    loader = DataLoader(TensorDataset(x, y), batch_size=16)
    features, _ = features_and_outputs(network, loader, "cpu")
    la = head_laplace(network.head, "classification", structure, "BackPackGGN", 5.5,
                      features, y, 16, "cpu")
    ours = la(features[:7], pred_type="glm", link_approx="probit")
    theirs = reference(x[:7], pred_type="glm", link_approx="probit")
    assert torch.allclose(ours, theirs, rtol=1e-4, atol=1e-6)
    assert float(la.log_marginal_likelihood()) == pytest.approx(
        float(reference.log_marginal_likelihood()), rel=1e-4)


def test_last_layer_laplace_regression_variance_matches_the_whole_network():
    network, x, y = small_problem(1, regression=True)
    reference = whole_network_laplace(network, x, y, "regression", "full", 10.0)
    features, _ = features_and_outputs(network, DataLoader(TensorDataset(x, y), 16), "cpu")
    la = head_laplace(network.head, "regression", "full", "BackPackGGN", 10.0, features, y, 16,
                      "cpu")
    mean, f_var = la(features[:5], pred_type="glm")
    ref_mean, ref_var = reference(x[:5], pred_type="glm")
    assert torch.allclose(mean, ref_mean, rtol=1e-5)
    assert torch.allclose(f_var, ref_var, rtol=1e-4)
    assert float(f_var.min()) > 0
    with torch.no_grad():
        assert torch.equal(mean.reshape(-1), network(x[:5]).reshape(-1))


def test_laplace_method_rejects_a_non_positive_prior_and_unknown_structure():
    with pytest.raises(ConfigError, match=r"^method.prior_precision=0 is not valid"):
        CheckpointLastLayerLaplace(prior_precision=0)
    with pytest.raises(ConfigError, match="method.hessian_structure='lowrank'"):
        CheckpointLastLayerLaplace(hessian_structure="lowrank", prior_precision=1.0)
