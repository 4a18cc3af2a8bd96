"""The laplace-torch classification adapter against laplace-torch called directly, on a tiny
one-conv network in float64 (24 points, 3 classes)."""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.laplace.classification import BACKENDS, LaplaceTorchClassifier
from bench.methods.settings import PredictionSettings
from bench.metrics.memory import held_tensors, stored_bytes

laplace = pytest.importorskip("laplace")

SEED = 7
N_CLASSES = 3


@dataclass
class TrainData:
    """The fitting data of the method contract."""

    train_inputs: Tensor
    train_labels: Tensor


def tiny_network() -> nn.Module:
    """Conv 1->2 (3x3), ReLU, flatten, Linear 32->5, ReLU, Linear 5->3; float64."""
    torch.manual_seed(1)
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32, 5),
                         nn.ReLU(), nn.Linear(5, N_CLASSES)).double()


@pytest.fixture(scope="module")
def data() -> TrainData:
    generator = make_generator(0)
    inputs = torch.randn(24, 1, 6, 6, generator=generator, dtype=torch.float64)
    return TrainData(inputs, torch.randint(0, N_CLASSES, (24,), generator=generator))


@pytest.fixture(scope="module")
def test_inputs() -> Tensor:
    return torch.randn(10, 1, 6, 6, generator=make_generator(1), dtype=torch.float64)


def direct_laplace(network, data, subset, structure, backend, prior=1.0, temperature=1.0):
    """laplace-torch fitted by hand with the same settings (laplace temperature = 1 / T)."""
    la = laplace.Laplace(copy.deepcopy(network), "classification", subset_of_weights=subset,
                         hessian_structure=structure, prior_precision=prior,
                         temperature=1.0 / temperature,
                         backend=getattr(laplace.curvature, backend))
    la.fit(DataLoader(TensorDataset(data.train_inputs, data.train_labels), batch_size=512))
    return la


def fitted(data, **settings) -> tuple[LaplaceTorchClassifier, dict]:
    method = LaplaceTorchClassifier(**settings)
    return method, method.fit(data, SEED, base=tiny_network())


def test_probit_with_marglik_prior_equals_laplace_torch(data, test_inputs):
    # Laplace Redux LA: last-layer KFAC GGN (BackPACK), scalar marglik, GLM probit.
    method, diagnostics = fitted(data, backend="BackPackGGN", prior_tuning="marglik")
    la = direct_laplace(tiny_network(), data, "last_layer", "kron", "BackPackGGN")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        la.optimize_prior_precision(pred_type="glm", method="marglik", n_steps=100, lr=0.1,
                                    init_prior_prec=1.0, prior_structure="scalar")
    assert diagnostics["prior_precision"] == pytest.approx(float(la.prior_precision), rel=1e-10)
    assert diagnostics["prior_precision"] != pytest.approx(1.0, rel=1e-3)  # it moved
    expected = la(test_inputs, pred_type="glm", link_approx="probit")
    torch.testing.assert_close(method.predict(test_inputs).probs, expected, rtol=1e-12, atol=0)
    assert diagnostics["laplace_class"] == "KronLLLaplace" and diagnostics["n_parameters"] == 18


@pytest.mark.parametrize(("subset", "structure", "backend", "prior_structure", "link"), [
    ("last_layer", "full", "BackPackEF", "scalar", "bridge"),  # Laplace Redux LA*
    ("all", "kron", "AsdlGGN", "layerwise", "probit"),
    ("all", "full", "AsdlEF", "diag", "bridge_norm"),
])
@pytest.mark.second_tier
def test_marglik_prior_structures_equal_laplace_torch(subset, structure, backend,
                                                      prior_structure, link, data, test_inputs):
    method, diagnostics = fitted(data, subset_of_weights=subset, hessian_structure=structure,
                                 backend=backend, prior_tuning="marglik",
                                 prior_structure=prior_structure, tune_steps=30,
                                 link_approx=link)
    la = direct_laplace(tiny_network(), data, subset, structure, backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        la.optimize_prior_precision(pred_type="glm", method="marglik", n_steps=30, lr=0.1,
                                    init_prior_prec=1.0, prior_structure=prior_structure)
    prior = la.prior_precision
    expected_prior = {"scalar": float(prior.mean()), "layerwise": prior.tolist(),
                      "diag": float(prior.mean())}[prior_structure]
    assert diagnostics["prior_precision"] == pytest.approx(expected_prior, rel=1e-10)
    if prior_structure == "layerwise":
        assert len(diagnostics["prior_precision"]) == 6  # 3 layers, weight and bias each
    expected = la(test_inputs, pred_type="glm", link_approx=link)
    torch.testing.assert_close(method.predict(test_inputs).probs, expected, rtol=1e-12, atol=0)


def test_nn_sampling_equals_laplace_torch_from_the_same_seed(data, test_inputs):
    method, _ = fitted(data, subset_of_weights="all", hessian_structure="diag",
                       pred_type="nn", link_approx="mc", n_samples=20, prior_precision=2.0,
                       temperature=3.0)
    la = direct_laplace(tiny_network(), data, "all", "diag", "AsdlGGN", prior=2.0,
                        temperature=3.0)
    torch.manual_seed(SEED)  # laplace-torch's own nn predictive draws from the global RNG
    expected = la(test_inputs, pred_type="nn", link_approx="mc", n_samples=20)
    torch.testing.assert_close(method.predict(test_inputs).probs, expected, rtol=1e-12,
                               atol=1e-15)
    # In chunks of 3 points every chunk sees the same 20 networks: the same predictive.
    method.prediction = PredictionSettings(batch_size=3)
    torch.testing.assert_close(method.predict(test_inputs).probs, expected, rtol=1e-12,
                               atol=1e-15)


def test_glm_monte_carlo_equals_laplace_torch_from_the_same_seed(data, test_inputs):
    method, _ = fitted(data, subset_of_weights="all", backend="CurvlinopsGGN", link_approx="mc",
                       n_samples=30)
    la = direct_laplace(tiny_network(), data, "all", "kron", "CurvlinopsGGN")
    torch.manual_seed(SEED)
    expected = la(test_inputs, pred_type="glm", link_approx="mc", n_samples=30)
    torch.testing.assert_close(method.predict(test_inputs).probs, expected, rtol=1e-12,
                               atol=1e-15)


def test_diagonal_posterior_precision_is_temperature_times_curvature_plus_prior(data):
    at_one, _ = fitted(data, subset_of_weights="all", hessian_structure="diag")
    curvature = at_one.la.H  # laplace-torch's GGN diagonal at T = 1 (its temperature 1)
    tempered, _ = fitted(data, subset_of_weights="all", hessian_structure="diag",
                         temperature=3.0, prior_precision=0.5)
    assert tempered.la.temperature == pytest.approx(1 / 3)
    torch.testing.assert_close(tempered.la.posterior_precision, 3.0 * curvature + 0.5,
                               rtol=1e-12, atol=0)
    assert curvature.abs().sum() > 0


@pytest.mark.parametrize("backend", ["AsdlGGN", "CurvlinopsGGN", "BackPackGGN"])
def test_ggn_diagonal_of_a_softmax_regression_is_the_closed_form(backend, data):
    # One Linear layer: the GGN is the Hessian, diag_(c,j) = sum_n p_nc (1 - p_nc) x_nj^2
    # (weights row-major, then the biases with x = 1).
    torch.manual_seed(2)
    network = nn.Sequential(nn.Flatten(), nn.Linear(36, N_CLASSES)).double()
    method = LaplaceTorchClassifier(subset_of_weights="all", hessian_structure="diag",
                                    backend=backend)
    method.fit(data, SEED, base=network)
    x = data.train_inputs.flatten(1)
    with torch.no_grad():
        p = torch.softmax(network(data.train_inputs), dim=-1)
    weight_part = torch.einsum("nc,nj->cj", p * (1 - p), x**2).reshape(-1)
    expected = torch.cat([weight_part, (p * (1 - p)).sum(0)])
    torch.testing.assert_close(method.la.H, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_named_backend_is_the_class_laplace_uses(backend, data):
    method, diagnostics = fitted(data, subset_of_weights="all", hessian_structure="diag",
                                 backend=backend)
    assert type(method.la.backend) is getattr(laplace.curvature, backend)
    assert diagnostics["backend"] == backend


def test_last_layer_fit_varies_only_the_last_layer(data, test_inputs):
    base = tiny_network()
    before = [p.detach().clone() for p in base.parameters()]
    method, diagnostics = fitted(data, hessian_structure="diag", pred_type="nn",
                                 link_approx="mc", n_samples=15)
    method_on_base = LaplaceTorchClassifier(hessian_structure="diag", pred_type="nn",
                                            link_approx="mc", n_samples=15)
    method_on_base.fit(data, SEED, base=base)
    probs = method_on_base.predict(test_inputs).probs
    assert diagnostics["n_parameters"] == 5 * N_CLASSES + N_CLASSES
    assert method.la.model.last_layer is list(method.la.model.model.children())[-1]
    # Hand-made predictive: fixed features, the 15 sampled last layers from the same seed.
    with torch.no_grad():
        features = base[:-1](test_inputs)
        draws = method_on_base.la.sample(15, generator=make_generator(SEED))
        weights = draws[:, :5 * N_CLASSES].reshape(15, N_CLASSES, 5)
        logits = torch.einsum("nf,scf->snc", features, weights) + draws[:, None, 5 * N_CLASSES:]
    torch.testing.assert_close(probs, torch.softmax(logits, dim=-1).mean(0), rtol=1e-12,
                               atol=1e-15)
    assert all(torch.equal(b, p) for b, p in zip(before, base.parameters(), strict=True))


def test_all_weights_sampling_leaves_the_base_network_unchanged(data, test_inputs):
    base = tiny_network()
    before = [p.detach().clone() for p in base.parameters()]
    method = LaplaceTorchClassifier(subset_of_weights="all", hessian_structure="diag",
                                    pred_type="nn", link_approx="mc", n_samples=5)
    method.fit(data, SEED, base=base)
    method.predict(test_inputs)
    assert all(torch.equal(b, p) for b, p in zip(before, base.parameters(), strict=True))


def test_a_very_cold_posterior_predicts_the_network_itself(data, test_inputs):
    # Softmax regression: every parameter has curvature, so T = 1e12 collapses the posterior
    # onto the network (a ReLU net keeps prior variance on parameters without curvature).
    torch.manual_seed(2)
    network = nn.Sequential(nn.Flatten(), nn.Linear(36, N_CLASSES)).double()
    method = LaplaceTorchClassifier(subset_of_weights="all", hessian_structure="diag",
                                    pred_type="nn", link_approx="mc", n_samples=5,
                                    temperature=1e12)
    method.fit(data, SEED, base=network)
    with torch.no_grad():
        expected = torch.softmax(network(test_inputs), dim=-1)
    torch.testing.assert_close(method.predict(test_inputs).probs, expected, rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize(("settings", "message"), [
    ({"subset_of_weights": "subnetwork"},
     r"^method\.subset_of_weights='subnetwork' is not valid; choose one of: all, last_layer$"),
    ({"hessian_structure": "banded"},
     r"^method\.hessian_structure='banded' is not valid; choose one of: diag, kron, full, "
     r"lowrank$"),
    ({"hessian_structure": "lowrank"},
     r"^method\.hessian_structure='lowrank' is not valid with "
     r"method\.subset_of_weights='last_layer' and method\.prior_tuning='fixed' .*; choose "
     r"subset_of_weights='all' and prior_tuning one of: fixed, marglik$"),
    ({"backend": "CurvlinopsHessian"}, r"^method\.backend='CurvlinopsHessian' is not valid; "
                                       r"choose one of: AsdlGGN, AsdlEF, CurvlinopsGGN, "),
    ({"link_approx": "sigmoid"}, r"^method\.link_approx='sigmoid' is not valid; choose one of: "
                                 r"probit, mc, bridge, bridge_norm$"),
    ({"pred_type": "la"}, r"^method\.pred_type='la' is not valid; choose one of: glm, nn$"),
    ({"prior_tuning": "gridsearch"}, r"^method\.prior_tuning='gridsearch' is not valid"),
    ({"temperature": 0.0}, r"^method\.temperature=0\.0 is not valid; it must be a positive"),
    ({"temperature": -1}, r"^method\.temperature=-1 is not valid; it must be a positive"),
    ({"prior_precision": 0}, r"^method\.prior_precision=0 is not valid"),
    ({"n_samples": 0}, r"^method\.n_samples=0 is not valid; it must be a positive integer$"),
    ({"pred_type": "nn"}, r"^method\.link_approx='probit' is not valid with method\.pred_type"),
    ({"prior_structure": "diag"}, r"^method\.prior_structure='diag' is not valid with "
                                  r"method\.hessian_structure='kron'"),
    ({"backend": "BackPackEF"}, r"^method\.backend='BackPackEF' is not valid with "
                                r"method\.hessian_structure='kron'"),
    ({"hessian_structure": "full", "prior_structure": "layerwise"},
     r"^method\.prior_structure='layerwise' is not valid with method\.hessian_structure='full' "
     r"and method\.subset_of_weights='last_layer'; choose one of: scalar, diag$"),
])
def test_bad_settings_are_one_line_config_errors_naming_the_key(settings, message):
    with pytest.raises(ConfigError, match=message) as error:
        LaplaceTorchClassifier(**settings)
    assert "\n" not in str(error.value)


def storages(tensors: dict[str, Tensor]) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors.values()}


# tiny_network: conv 2*9 + 2, linear 32*5 + 5, last layer 5*3 + 3 = 203 parameters.
N_NETWORK, N_LAST = 203, 18


@pytest.mark.parametrize(("structure", "backend", "laplace_values"), [
    # Kronecker factors from BackPack: weight 3x3 (outputs) and 5x5 (inputs), bias its own 3x3;
    # their eigendecompositions: eigenvectors of the same sizes, 3 + 5 + 3 eigenvalues, and one
    # delta per factor group (2).
    ("kron", "BackPackGGN", (9 + 25 + 9) + (9 + 25 + 9) + (3 + 5 + 3) + 2),
    # The 18 x 18 precision and the posterior scale the prediction caches.
    ("full", "BackPackEF", 2 * N_LAST ** 2)])
def test_stored_tensors_are_one_network_and_the_laplace_state(data, test_inputs, structure,
                                                               backend, laplace_values):
    method, _ = fitted(data, hessian_structure=structure, backend=backend,
                       prior_tuning="marglik", tune_steps=2)
    method.predict(test_inputs)
    tensors = method.stored_tensors()
    # What the LA needs to predict: its own copy of the network, the last-layer mean, the
    # curvature, and four scalars: prior precision, prior mean, noise, loss. All float64.
    expected = N_NETWORK + N_LAST + laplace_values + 4
    assert stored_bytes(tensors) == expected * 8
    assert all(t.dtype == torch.float64 for t in tensors.values())
    if structure == "kron":
        assert [tuple(tensors[f"la.H_facs.kfacs.{i}"].shape) for i in ("0.0", "0.1", "1.0")] \
            == [(3, 3), (5, 5), (3, 3)]
    # Beside it laplace-torch keeps the parameters of the network it was handed (la.params,
    # the adapter's copy): the network a second time.
    unread = method.unread_tensors()
    assert set(unread) == {f"la.params.{i}" for i in range(6)}
    assert stored_bytes(unread) == N_NETWORK * 8
    assert not storages(unread) & storages(tensors)
    # laplace-torch's own state_dict (its checkpoint) holds nothing we miss, except the first
    # training batch it keeps to find the last layer.
    own = held_tensors({k: v for k, v in method.la.state_dict().items() if k != "data"})
    assert storages(own) <= storages(tensors) | storages(unread)
    assert not storages(held_tensors(method.la.data)) & storages(tensors)


@pytest.mark.parametrize(("structure", "backend"), [("kron", "BackPackGGN"),
                                                    ("full", "BackPackEF")])
def test_last_layer_laplace_never_reads_its_unread_tensors(data, test_inputs, structure,
                                                           backend):
    method, _ = fitted(data, hessian_structure=structure, backend=backend,
                       prior_tuning="marglik", tune_steps=2)
    probs = method.predict(test_inputs).probs
    evidence = float(method.la.log_marginal_likelihood())
    with torch.no_grad():
        for tensor in method.unread_tensors().values():
            tensor.fill_(float("nan"))
    torch.testing.assert_close(method.predict(test_inputs).probs, probs, rtol=0, atol=0)
    assert float(method.la.log_marginal_likelihood()) == evidence
    assert torch.isfinite(method.la.predictive_samples(
        test_inputs, pred_type="nn", n_samples=2, generator=make_generator(0))).all()


def test_all_weights_laplace_reads_every_tensor_it_holds(data):
    method, _ = fitted(data, subset_of_weights="all", hessian_structure="diag")
    assert method.unread_tensors() == {}
    assert stored_bytes(method.stored_tensors()) >= N_NETWORK * 8
