"""The tempered Laplace method: exact samplers per structure against the dense posterior,
laplace-torch at T = 1 (tau = 1/T), fixed draws across temperatures, and one-line errors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from bench.curvature.dense import BlockDiagonal
from bench.curvature.kfac_scaling import (
    LibraryAccumulation,
    layer_frobenius_norm,
    paper_like_kfac,
)
from bench.harness.errors import ConfigError
from bench.methods.laplace.tempered import (
    TemperedLaplace,
    posterior_draws,
    sampled_probabilities,
    smallest_working_prior_precision,
)
from bench.predictive.categorical import Categorical
from bench.predictive.densities import Gaussian
from tests.unit.curvature.tiny_nets import dense_ggn, tiny_batchnorm_net, tiny_conv_net, tiny_mlp

STRUCTURES = ["diag", "kfac", "ekfac", "bdiag"]


@pytest.fixture(scope="module")
def data():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(7, 1, 5, 5, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (7,), generator=generator)
    return SimpleNamespace(train_inputs=x, train_labels=y)


def fitted(data, structure, **options):
    method = TemperedLaplace(structure=structure, fisher_type="type-2", batch_size=3,
                             prior_precision=0.5, **options)
    method.fit(data, seed=0, base=tiny_conv_net())
    return method


def whitened_covariance(draws, precision):
    """``L^T cov(draws) L`` with ``L L^T = precision``: the identity for exact draws."""
    chol = torch.linalg.cholesky(precision)
    centred = draws - draws.mean(0)
    return chol.T @ (centred.T @ centred / (len(draws) - 1)) @ chol


@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.second_tier
def test_samples_have_the_inverse_dense_precision_as_covariance(data, structure):
    method = fitted(data, structure, n_samples=20000)
    for temperature in (0.1, 3.0):
        precision = (temperature * method.curvature.to_dense()
                     + 0.5 * torch.eye(method.curvature.n_params, dtype=torch.float64))
        draws = method.parameter_draws(temperature) - method.theta_map
        # 20000 draws: entries of the whitened covariance have sd <= sqrt(2 / 20000) = 0.01
        deviation = whitened_covariance(draws, precision) - torch.eye(len(precision))
        assert deviation.abs().max() < 0.06, (structure, temperature)
        exact = posterior_draws(method._precision, temperature, 0.5,
                                torch.eye(len(precision), dtype=torch.float64)).T
        torch.testing.assert_close(exact @ exact.T, torch.linalg.inv(precision))


def test_paper_like_kfac_draws_have_the_library_precision(data):
    # The library's K-FAC (notes 7.6) on the 7 training inputs: factors summed over
    # U = 30 ceil(7 / 32) = 30 minibatch means, the convolution's 25 positions dividing its
    # output factor, damped per factor.
    method = fitted(data, "kfac", accumulation="paper-like", n_samples=20000)
    for temperature in (0.1, 3.0):
        precision = paper_like_kfac(method.curvature, 7, 32, 30, temperature, 0.5,
                                    positions=(25, 1, 1)).to_dense()
        draws = method.parameter_draws(temperature) - method.theta_map
        deviation = whitened_covariance(draws, precision) - torch.eye(len(precision))
        assert deviation.abs().max() < 0.06, temperature
        exact = posterior_draws(method._precision, temperature, 0.5,
                                torch.eye(len(precision), dtype=torch.float64)).T
        torch.testing.assert_close(exact @ exact.T, torch.linalg.inv(precision))


@pytest.mark.parametrize("structure", ["diag", "kfac", "ekfac"])
def test_diagnostics_hold_both_accumulations_last_layer_norms(data, structure):
    exact, library = (fitted(data, structure, n_samples=2, accumulation=a)
                      for a in ("exact", "paper-like"))
    sizes = [20, 45, 18]  # Conv2d(1, 2, 3), Linear(8, 5), Linear(5, 3) with their biases
    diagnostics = exact.fit(data, seed=0, base=tiny_conv_net())
    assert diagnostics["accumulation"] == "exact" and diagnostics["library_updates"] == 30
    assert math.isclose(diagnostics["last_layer_frobenius_norm"],
                        layer_frobenius_norm(exact.curvature, -1, sizes))
    expected = LibraryAccumulation(7, 32, 30, (25, 1, 1)).layer_norm(exact.curvature, -1, sizes)
    assert math.isclose(diagnostics["paper_like_last_layer_frobenius_norm"], expected)
    # the draws follow the chosen accumulation; the norms are the same either way
    other = library.fit(data, seed=0, base=tiny_conv_net())
    assert other["paper_like_last_layer_frobenius_norm"] == pytest.approx(expected)
    if structure != "kfac":
        # Diag and EKFAC: the library's precision at T is the exact one at T * c
        rescaled = fitted(data, structure, n_samples=2, temperature=30 / 32**(
            2 if structure == "ekfac" else 1))
        torch.testing.assert_close(library.parameter_draws(1.0),
                                   rescaled.parameter_draws(rescaled.temperature))


def test_prior_dominated_share_counts_directions_where_t_f_is_below_delta(data):
    method = fitted(data, "diag", n_samples=2)
    d = method.curvature.diagonal()
    for temperature in (1e-3, 1.0, 1e3):
        expected = float((temperature * d < 0.5).double().mean())
        assert method.prior_dominated_share(temperature) == pytest.approx(expected)


def test_one_set_of_draws_serves_every_temperature(data):
    method = fitted(data, "diag", n_samples=4)
    d = method.curvature.diagonal()
    first, second = (method.parameter_draws(t) - method.theta_map for t in (0.01, 100.0))
    torch.testing.assert_close(first * (0.01 * d + 0.5).sqrt(), method.z)
    torch.testing.assert_close(second * (100.0 * d + 0.5).sqrt(), method.z)


def test_predictive_averages_the_softmax_over_the_draws(data):
    method = fitted(data, "kfac", n_samples=5, prediction={"batch_size": 3})
    x = data.train_inputs
    predictions = method.predict_tempered(x, [0.5, 2.0])
    for temperature, predictive in predictions.items():
        thetas = method.parameter_draws(temperature)
        expected = torch.zeros(len(x), 3, dtype=torch.float64)
        for theta in thetas:
            net = tiny_conv_net()
            torch.nn.utils.vector_to_parameters(theta, net.parameters())
            expected += torch.softmax(net(x), -1).detach() / len(thetas)
        assert isinstance(predictive, Categorical)
        torch.testing.assert_close(predictive.probs, expected)
    torch.testing.assert_close(method.predict(x).probs,
                               method.predict_tempered(x, [1.0])[1.0].probs)


def test_a_cold_posterior_collapses_onto_the_map_network(data):
    method = fitted(data, "ekfac", n_samples=3)
    x = data.train_inputs
    cold = method.predict_tempered(x, [1e12])[1e12]
    torch.testing.assert_close(cold.probs, torch.softmax(tiny_conv_net()(x), -1).detach(),
                               atol=1e-5, rtol=0)


@pytest.mark.parametrize(("structure", "ours"), [("diag", "diag"), ("kron", "kfac")])
def test_precision_at_temperature_equals_laplace_torch(data, structure, ours):
    from laplace import Laplace
    from laplace.curvature import CurvlinopsGGN

    net = tiny_conv_net()
    la = Laplace(net, "classification", subset_of_weights="all", hessian_structure=structure,
                 backend=CurvlinopsGGN, prior_precision=0.5, temperature=1 / 3.0)
    la.fit(DataLoader(TensorDataset(data.train_inputs, data.train_labels), batch_size=3))
    method = fitted(data, ours)
    precision = method.curvature.scaled(3.0, 0.5).to_dense()
    if structure == "diag":
        torch.testing.assert_close(la.posterior_precision, precision.diagonal())
        return
    # laplace-torch factors weight and bias separately: our joint [W | b] K-FAC without its
    # weight-bias cross terms.
    is_bias = torch.cat([torch.cat([torch.zeros(p.numel() - len(p)), torch.ones(len(p))])
                         if name.endswith("bias") else torch.zeros(p.numel())
                         for name, p in net.named_parameters()]).bool()
    cross = is_bias.unsqueeze(0) ^ is_bias.unsqueeze(1)
    torch.testing.assert_close(la.posterior_precision.to_matrix(), precision * ~cross)


@pytest.mark.second_tier
def test_diag_sampler_matches_laplace_torch_sampler(data):
    from laplace import Laplace
    from laplace.curvature import CurvlinopsGGN

    net = tiny_conv_net()
    la = Laplace(net, "classification", subset_of_weights="all", hessian_structure="diag",
                 backend=CurvlinopsGGN, prior_precision=0.5, temperature=1.0)
    la.fit(DataLoader(TensorDataset(data.train_inputs, data.train_labels), batch_size=7))
    theirs = la.sample(20000, generator=torch.Generator().manual_seed(3))
    ours = fitted(data, "diag", n_samples=20000).parameter_draws(1.0)
    torch.testing.assert_close(theirs.var(0) / ours.var(0),
                               torch.ones(ours.shape[1], dtype=torch.float64), atol=0.06,
                               rtol=0)
    torch.testing.assert_close(ours.mean(0), theirs.mean(0), atol=0.05, rtol=0)


def test_regression_toy_gives_a_gaussian_predictive():
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(20, 1, generator=generator, dtype=torch.float64) * 8 - 4
    data = SimpleNamespace(train_inputs=x, train_labels=x**3)
    method = TemperedLaplace(structure="bdiag", likelihood="regression", fisher_type="type-2",
                             noise_std=3.0, n_samples=200)
    method.fit(data, seed=0, base=tiny_mlp((1, 7, 7, 1)))
    predictive = method.predict(x)
    samples = method.function_samples(x, 1.0)[..., 0]
    assert isinstance(predictive, Gaussian) and samples.shape == (200, 20)
    torch.testing.assert_close(predictive.variance, samples.var(0) + 9.0)


def test_a_failed_factorisation_names_the_prior_precision_and_the_smallest_working_value():
    # An indefinite block (eigenvalues 2 and -1): T F + delta I factorises iff delta > T.
    block = torch.tensor([[0.5, 1.5], [1.5, 0.5]], dtype=torch.float64)
    curvature = BlockDiagonal((torch.arange(2),), (block,), 2)
    z = torch.randn(3, 2, dtype=torch.float64)
    with pytest.raises(ConfigError, match=r"^method.prior_precision=0.5: factorising T\*F \+ "
                                          r"delta\*I failed at temperature 2; the smallest "
                                          r"working value is about 2\.0\d$"):
        posterior_draws(curvature, 2.0, 0.5, z)
    assert 2.0 < smallest_working_prior_precision(curvature, 2.0, 0.5) < 2.0 * 10**(1 / 256)


@pytest.mark.parametrize(("options", "message"), [
    ({"structure": "full"}, "^method.structure='full' is not valid; choose one of: diag, "
                            "kfac, ekfac, bdiag$"),
    ({"temperature": 0.0}, "^method.temperature=0.0 is not valid; it must be a positive "
                           "number$"),
    ({"prior_precision": -1.0}, "^method.prior_precision=-1.0 is not valid"),
    ({"accumulation": "sum"}, "^method.accumulation='sum' is not valid; choose one of: exact, "
                              "paper-like$"),
    ({"library_batch_size": 0}, "^method.library_batch_size=0 is not valid"),
])
def test_bad_configuration_is_one_line_naming_the_key(options, message):
    with pytest.raises(ConfigError, match=message):
        TemperedLaplace(**options)


def test_a_sweep_temperature_must_be_positive(data):
    method = fitted(data, "diag", n_samples=2)
    with pytest.raises(ConfigError, match="^method.temperature=-1 is not valid"):
        method.predict_tempered(data.train_inputs, [1.0, -1])


@pytest.mark.parametrize("vectorise", [True, False])
def test_batched_draws_match_one_network_per_draw(vectorise):
    net = tiny_conv_net()
    x = torch.randn(5, 1, 5, 5, dtype=torch.float64)
    thetas = torch.randn(4, 83, dtype=torch.float64)
    expected = []
    for theta in thetas:
        torch.nn.utils.vector_to_parameters(theta, net.parameters())
        expected.append(torch.softmax(net(x), -1).detach())
    torch.testing.assert_close(sampled_probabilities(net, thetas, x, 2, vectorise),
                               torch.stack(expected).mean(0))


@pytest.fixture(scope="module")
def batchnorm_data():
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(6, 1, 5, 5, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (6,), generator=generator)
    return SimpleNamespace(train_inputs=x, train_labels=y)


def with_weights(theta):
    """The batch norm net with its curvature parameters (conv weight, linear layers) set to
    ``theta`` and its batch norm left as built."""
    net = tiny_batchnorm_net()
    params = [net[0].weight, net[5].weight, net[5].bias, net[7].weight, net[7].bias]
    torch.nn.utils.vector_to_parameters(theta, params)
    return net


@pytest.mark.parametrize("structure", ["diag", "kfac", "ekfac"])
@pytest.mark.second_tier
def test_batchnorm_net_samples_have_the_inverse_dense_precision_as_covariance(
        batchnorm_data, structure):
    base = tiny_batchnorm_net()
    method = TemperedLaplace(structure=structure, fisher_type="type-2", batch_size=4,
                             prior_precision=0.5, n_samples=20000)
    method.fit(batchnorm_data, seed=0, base=base)
    dense = {"diag": lambda m: torch.diag(m.diagonal()),
             "kfac": lambda m: m.to_dense(), "ekfac": lambda m: m.to_dense()}[structure]
    assert method.curvature.n_params == 81
    if structure == "diag":
        torch.testing.assert_close(method.curvature.diagonal(),
                                   dense_ggn(base, batchnorm_data.train_inputs).diagonal())
    for temperature in (0.1, 3.0):
        precision = (temperature * dense(method.curvature)
                     + 0.5 * torch.eye(81, dtype=torch.float64))
        draws = method.parameter_draws(temperature) - method.theta_map
        deviation = whitened_covariance(draws, precision) - torch.eye(81)
        assert deviation.abs().max() < 0.06, (structure, temperature)


def test_batchnorm_net_predictive_perturbs_only_the_curvature_layers(batchnorm_data):
    base = tiny_batchnorm_net()
    before = {k: v.clone() for k, v in base.state_dict().items()}
    method = TemperedLaplace(structure="kfac", fisher_type="type-2", prior_precision=0.5,
                             n_samples=4, prediction={"batch_size": 4})
    method.fit(batchnorm_data, seed=0, base=base)
    x = batchnorm_data.train_inputs
    predictive = method.predict_tempered(x, [0.3])[0.3]
    expected = torch.stack([torch.softmax(with_weights(theta)(x), -1).detach()
                            for theta in method.parameter_draws(0.3)]).mean(0)
    torch.testing.assert_close(predictive.probs, expected)
    assert not method.model.training
    for model in (base, method.model):
        for key, value in model[1].state_dict().items():
            torch.testing.assert_close(value, before[f"1.{key}"], rtol=0, atol=0)


def test_batchnorm_net_vectorised_draws_match_one_network_per_draw():
    net = tiny_batchnorm_net()
    x = torch.randn(5, 1, 5, 5, dtype=torch.float64)
    thetas = torch.randn(3, 81, dtype=torch.float64)
    expected = torch.stack([torch.softmax(with_weights(t)(x), -1).detach() for t in thetas])
    for vectorise in (True, False):
        torch.testing.assert_close(sampled_probabilities(net, thetas, x, 2, vectorise),
                                   expected.mean(0))
