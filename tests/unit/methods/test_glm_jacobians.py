"""laplace-torch's GLM predictive with per-input Jacobians: the same Jacobians, logits and
predictive probabilities as the library's whole-batch ``jacrev``, with the library's kept where
it must be."""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from laplace.curvature import AsdlGGN, BackPackGGN
from torch.utils.data import DataLoader, TensorDataset

from bench.curvature.jacobians import logit_jacobians
from bench.methods.laplace.glm_jacobians import batch_jacobian_names, per_input_jacobians
from bench.models.classifiers import build_classifier


def network(name: str, **options) -> torch.nn.Module:
    return build_classifier(name, torch.Generator().manual_seed(0), **options).eval()


def images(n: int, shape: tuple[int, ...], seed: int = 1) -> torch.Tensor:
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("name", "shape", "options"), [
    ("lenet_redux", (1, 28, 28), {}), ("wrn16_4", (3, 32, 32), {"widen": 1})])
@pytest.mark.second_tier
def test_per_input_jacobians_equal_the_librarys_whole_batch_jacobians(name, shape, options):
    net = network(name, **options)
    if name == "wrn16_4":  # frozen BatchNorm, as the Figure 8 grid fits the WRN
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.requires_grad_(False)
                module.bias.requires_grad_(False)
    backend = AsdlGGN(net, "classification")
    x = images(5, shape)
    expected_j, expected_f = backend.functorch_jacobians(x)
    got_j, got_f = logit_jacobians(net, backend.params_dict, backend.buffers_dict, x)
    assert got_j.shape == expected_j.shape == (5, 10, sum(p.numel() for p in
                                                          backend.params_dict.values()))
    assert torch.allclose(got_j, expected_j, atol=1e-6, rtol=1e-5)
    assert torch.allclose(got_f, expected_f, atol=1e-6)


def fitted_kron(net: torch.nn.Module) -> Laplace:
    x = images(64, (1, 28, 28), seed=2)
    y = torch.arange(64) % 10
    la = Laplace(net, "classification", subset_of_weights="all", hessian_structure="kron",
                 backend=AsdlGGN, prior_precision=5.0)
    la.fit(DataLoader(TensorDataset(x, y), batch_size=32))
    return la


@pytest.fixture(scope="module")
def kron_la() -> Laplace:
    """The fitted KFAC Laplace both links predict with (neither changes it: the test checks
    that its backend is restored)."""
    return fitted_kron(network("lenet_redux"))


@pytest.mark.parametrize("link", ["probit", "bridge"])
@pytest.mark.second_tier
def test_the_glm_predictive_is_the_librarys_and_the_backend_is_restored(link, kron_la):
    la = kron_la
    x = images(12, (1, 28, 28), seed=3)
    expected = la(x, pred_type="glm", link_approx=link)
    calls = []
    original = logit_jacobians

    def counted(*args):
        calls.append(1)
        return original(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("bench.methods.laplace.glm_jacobians.logit_jacobians", counted)
        with per_input_jacobians(la):
            got = la(x, pred_type="glm", link_approx=link)
    assert calls, "the per-input Jacobians were not used"
    assert torch.allclose(got, expected, atol=1e-6)
    assert "functorch_jacobians" not in vars(la.backend) and "jacobians" not in vars(la.backend)


def test_a_network_in_train_mode_and_backpacks_own_jacobians_keep_the_librarys():
    la = fitted_kron(network("lenet_redux"))
    library = la.backend.functorch_jacobians
    la.model.train()
    x = images(3, (1, 28, 28), seed=4)
    with per_input_jacobians(la):
        got = la.backend.functorch_jacobians(x)
    assert torch.equal(got[0], library(x)[0])
    assert batch_jacobian_names(BackPackGGN(network("lenet_redux"), "classification")) == [
        "functorch_jacobians"]  # its own per-output batch gradients stay its jacobians
    assert batch_jacobian_names(la.backend) == ["functorch_jacobians"]  # ASDL: the GLM calls it
