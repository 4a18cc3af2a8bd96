"""The eigendecomposition log marginal likelihood against slogdet and laplace-torch, and the
online-marglik Laplace method: stored state reused, the learned prior in its diagnostics, its
predictive laplace-torch's GLM Monte Carlo from the sample seed, one-line config errors."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bench.curvature.linalg import logdet_shifted
from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.laplace.marglik import EigenLogMarginalLikelihood, fit_laplace
from bench.methods.laplace.online_marglik import OnlineMarglikLaplace

laplace = pytest.importorskip("laplace")


def tiny_network() -> nn.Module:
    """Conv 1->2 (3x3), ReLU, flatten, Linear 32->5, ReLU, Linear 5->3 (203 weights); float64."""
    torch.manual_seed(1)
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32, 5),
                         nn.ReLU(), nn.Linear(5, 3)).double().eval()


@pytest.fixture(scope="module")
def loader() -> DataLoader:
    generator = make_generator(0)
    x = torch.randn(24, 1, 6, 6, generator=generator, dtype=torch.float64)
    return DataLoader(TensorDataset(x, torch.randint(0, 3, (24,), generator=generator)),
                      batch_size=8)


def full_fit(loader, subset="all"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_laplace(tiny_network(), loader, subset, "full", "AsdlGGN", 1.0,
                           last_layer="5")


def test_the_shifted_log_det_from_eigenvalues_is_slogdet_of_the_shifted_ggn(loader):
    ggn = full_fit(loader).H
    assert ggn.shape == (203, 203)
    eigenvalues = torch.linalg.eigvalsh(ggn)
    for shift in (1e-3, 0.7, 30.0):
        sign, expected = torch.linalg.slogdet(ggn + shift * torch.eye(203, dtype=ggn.dtype))
        assert float(sign) == 1.0
        assert float(logdet_shifted(eigenvalues, shift)) == pytest.approx(float(expected),
                                                                          rel=1e-12)
    # A hand case: eigenvalues 0, 1, 3 shifted by 1 -> log(1 * 2 * 4).
    assert float(logdet_shifted(torch.tensor([0.0, 1.0, 3.0]), 1.0)) == pytest.approx(
        math.log(8.0), rel=1e-6)


@pytest.mark.parametrize("subset", ["all", "last_layer"])
def test_the_eigen_marglik_is_laplace_torchs_in_value_and_gradient(loader, subset):
    la = full_fit(loader, subset)
    eigen = EigenLogMarginalLikelihood(la)
    assert eigen.n_params == (203 if subset == "all" else 18)
    for delta in (0.05, 1.0, 30.0):
        log_delta = torch.tensor([math.log(delta)], dtype=torch.float64, requires_grad=True)
        ours = eigen(log_delta.exp())
        (ours_grad,) = torch.autograd.grad(ours, log_delta)
        log_delta_2 = log_delta.detach().clone().requires_grad_()
        theirs = la.log_marginal_likelihood(log_delta_2.exp())
        (theirs_grad,) = torch.autograd.grad(theirs, log_delta_2)
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-10)
        assert float(ours_grad) == pytest.approx(float(theirs_grad), rel=1e-8, abs=1e-10)


def tiny_data(results_dir, n: int = 16) -> TrainingSet:
    generator = make_generator(0)
    return TrainingSet(torch.rand(n, 1, 28, 28, generator=generator),
                       torch.randint(0, 10, (n,), generator=generator), name="random",
                       results_dir=str(results_dir))


def tiny_method(**overrides) -> OnlineMarglikLaplace:
    """The Redux LeNet, 2 epochs of 2 minibatches, 3 hyper-steps, 5 predictive samples."""
    values = {"hessian_structure": "diag", "epochs": 2, "batch_size": 8, "hyper_steps": 3,
              "n_samples": 5, "prediction": {"batch_size": 3}}
    return OnlineMarglikLaplace(**{**values, **overrides})


def test_fit_stores_the_learned_prior_and_a_refit_reuses_it(tmp_path):
    data = tiny_data(tmp_path)
    method = tiny_method()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diagnostics = method.fit(data, seed=3)
        again = tiny_method()
        reused = again.fit(data, seed=3)
        x = torch.rand(4, 1, 28, 28, generator=make_generator(5))
        first, second = method.predict(x).probs, again.predict(x).probs
    assert not diagnostics["state_reused"] and reused["state_reused"]
    assert diagnostics["marglik_updates"] == 2 and diagnostics["epochs"] == 2
    assert len(diagnostics["prior_precision"]) == 10
    assert all(p > 0 for p in diagnostics["prior_precision"])
    assert diagnostics["prior_precision"] != [30.0] * 10
    assert torch.allclose(method.la.prior_precision,
                          torch.tensor(diagnostics["prior_precision"]))
    assert diagnostics["best_neg_log_marglik"] == min(
        diagnostics["neg_log_marglik_per_update"])
    assert diagnostics["laplace_class"] == "DiagLaplace" and diagnostics["n_parameters"] == 44426
    assert torch.equal(first, second)
    assert torch.allclose(first.sum(-1), torch.ones(4))
    # The predictive is laplace-torch's GLM Monte Carlo, drawn from the sample seed; its
    # Jacobians are taken one input at a time, which rounds differently from laplace-torch's
    # batched ones on some CPUs (by 1 float32 ulp on an AVX-512 Xeon).
    generator = make_generator(711)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch.cat([method.la.predictive_samples(chunk, pred_type="glm", n_samples=5,
                                                           generator=generator).mean(0)
                              for chunk in x.split(3)])
    torch.testing.assert_close(first, expected, rtol=1e-6, atol=1e-9)


def test_the_last_layer_stand_in_fits_a_full_last_layer_laplace(tmp_path):
    method = tiny_method(hessian_structure="full", subset_of_weights="last_layer",
                         prior_structure="scalar", log_det="eigen", epochs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diagnostics = method.fit(tiny_data(tmp_path), seed=0)
    assert diagnostics["laplace_class"] == "FullLLLaplace"
    assert diagnostics["n_parameters"] == 84 * 10 + 10
    assert len(diagnostics["prior_precision"]) == 1


@pytest.mark.parametrize(("overrides", "message"), [
    ({"prior_precision": 0}, "method.prior_precision=0 is not valid; it must be a positive "
                             "number"),
    ({"prior_precision": -1.0}, "method.prior_precision=-1.0 is not valid"),
    ({"hessian_structure": "lowrank"}, "method.hessian_structure='lowrank' is not valid; "
                                       "choose one of: diag, kron, full"),
    ({"log_det": "eigen"}, "method.log_det='eigen' is not valid with "
                           "method.hessian_structure='kron'"),
    ({"backend": "asdl"}, "method.backend='asdl' is not valid; choose one of: AsdlGGN"),
    ({"hessian_structure": "kron", "subset_of_weights": "last_layer",
      "prior_structure": "scalar"}, "method.subset_of_weights='last_layer' is not valid"),
    ({"epochs": 0}, "method.epochs=0 is not valid"),
])
def test_bad_values_are_one_line_config_errors_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as error:
        OnlineMarglikLaplace(**overrides)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_refit_set_larger_than_the_training_set_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="method.refit_size=17 is not valid; the training set "
                                          "has 16 images"):
        tiny_method(refit_size=17).fit(tiny_data(tmp_path), seed=0)


def test_the_training_settings_carry_every_training_key_of_the_method():
    values = {"subset_of_weights": "last_layer", "prior_structure": "scalar",
              "prior_precision": 2.5, "epochs": 7, "lr": 0.01, "min_lr": 1e-4,
              "batch_size": 16, "hyper_lr": 0.5, "hyper_steps": 4, "marglik_frequency": 2,
              "burnin_epochs": 3, "refit_size": 40}
    method = OnlineMarglikLaplace(hessian_structure="diag", fit_batch_size=24, **values)
    assert method.settings().to_dict() == {**values, "refit_batch_size": 24}
