"""Curvature of nn.Module classifiers: every structure against dense references (jacrev) and
curvlinops' K-FAC / EKFAC operators, on a tiny float64 conv net."""

from __future__ import annotations

import pytest
import torch
from curvlinops import EKFACLinearOperator, KFACLinearOperator
from torch import nn
from torch.nn.utils import parameters_to_vector

from bench.curvature.module_curvature import (
    GaussianEmpiricalFisher,
    SoftmaxGGN,
    SoftmaxSampledFisher,
    curvature_layers,
    flat_parameters,
    module_curvature,
    output_curvature,
    output_vectors,
)
from bench.harness.errors import ConfigError
from tests.unit.curvature.tiny_nets import (
    block_mask,
    dense_empirical_fisher,
    dense_ggn,
    jacobian,
    lenet5,
    tiny_batchnorm_net,
    tiny_conv_net,
    tiny_mlp,
)

SIZES = [20, 45, 18]  # parameters per layer of tiny_conv_net


@pytest.fixture(scope="module")
def problem():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(7, 1, 5, 5, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (7,), generator=generator)
    return tiny_conv_net(), x, y


def reference(net, x, y, fisher_type):
    return dense_ggn(net, x) if fisher_type == "type-2" else dense_empirical_fisher(net, x, y)


@pytest.mark.parametrize("fisher_type", ["type-2", "empirical"])
def test_diag_is_the_dense_curvature_diagonal(problem, fisher_type):
    net, x, y = problem
    diag = module_curvature(net, x, y, "diag", fisher_type=fisher_type, batch_size=3)
    torch.testing.assert_close(diag.diagonal(), reference(net, x, y, fisher_type).diagonal())


@pytest.mark.parametrize("fisher_type", ["type-2", "empirical"])
def test_bdiag_is_the_dense_curvature_on_its_layer_blocks(problem, fisher_type):
    net, x, y = problem
    bdiag = module_curvature(net, x, y, "bdiag", fisher_type=fisher_type, batch_size=4)
    expected = reference(net, x, y, fisher_type) * block_mask(SIZES)
    torch.testing.assert_close(bdiag.to_dense(), expected)


@pytest.mark.parametrize("fisher_type", ["type-2", "empirical"])
@pytest.mark.parametrize(("structure", "operator"),
                         [("kfac", KFACLinearOperator), ("ekfac", EKFACLinearOperator)])
def test_kfac_and_ekfac_equal_curvlinops(problem, structure, operator, fisher_type):
    net, x, y = problem
    ours = module_curvature(net, x, y, structure, fisher_type=fisher_type, batch_size=3)
    theirs = operator(net, nn.CrossEntropyLoss(reduction="sum"), list(net.parameters()),
                      [(x, y)], fisher_type=fisher_type, separate_weight_and_bias=False,
                      check_deterministic=False)
    eye = torch.eye(ours.n_params, dtype=torch.float64)
    torch.testing.assert_close(ours.to_dense(), theirs @ eye)


def test_ekfac_equals_kfac_when_the_curvature_is_exactly_kronecker():
    # One input through Linear layers: every layer's curvature is sum_k g_k g_k^T kron a a^T,
    # an exact Kronecker product, so EKFAC's refitted eigenvalues are K-FAC's products.
    net = tiny_mlp((4, 3, 3))
    x = torch.randn(1, 4, dtype=torch.float64)
    kfac = module_curvature(net, x, None, "kfac")
    ekfac = module_curvature(net, x, None, "ekfac")
    torch.testing.assert_close(ekfac.to_dense(), kfac.to_dense())
    torch.testing.assert_close(kfac.to_dense(), dense_ggn(net, x) * block_mask([15, 12]))


def test_mc_fisher_approaches_the_exact_ggn(problem):
    # 7 inputs x 400 labels: a relative error of about 1/sqrt(2800) per entry.
    net, x, y = problem
    mc = module_curvature(net, x, None, "diag", fisher_type="mc", mc_samples=400,
                          generator=torch.Generator().manual_seed(0))
    exact = dense_ggn(net, x).diagonal()
    assert (mc.diagonal() - exact).abs().max() < 0.06 * exact.max()


def test_mc_labels_come_from_the_generator(problem):
    net, x, _ = problem
    first, again, other = (module_curvature(net, x, None, "diag", fisher_type="mc",
                                            mc_samples=3,
                                            generator=torch.Generator().manual_seed(seed))
                           for seed in (0, 0, 1))
    torch.testing.assert_close(again.diagonal(), first.diagonal(), rtol=0, atol=0)
    assert not torch.equal(other.diagonal(), first.diagonal())


@pytest.mark.parametrize(("likelihood", "fisher_type", "kind"), [
    ("classification", "type-2", SoftmaxGGN), ("classification", "mc", SoftmaxSampledFisher),
    ("regression", "empirical", GaussianEmpiricalFisher)])
def test_likelihood_and_fisher_type_pick_one_output_curvature(likelihood, fisher_type, kind):
    chosen = output_curvature(likelihood, fisher_type, mc_samples=3, noise_std=0.5)
    assert type(chosen) is kind and (chosen.mc_samples, chosen.noise_std) == (3, 0.5)


@pytest.mark.parametrize(("likelihood", "fisher_type", "message"), [
    ("poisson", "type-2",
     "method.likelihood='poisson' is not valid; choose one of: classification, regression"),
    ("regression", "type-1",
     "method.fisher_type='type-1' is not valid; choose one of: type-2, mc, empirical")])
def test_an_unknown_likelihood_or_fisher_type_is_a_one_line_config_error(likelihood,
                                                                         fisher_type, message):
    with pytest.raises(ConfigError) as error:
        output_curvature(likelihood, fisher_type)
    assert str(error.value) == message


def test_output_vectors_factor_the_softmax_hessian():
    logits = torch.tensor([[0.3, -1.0, 2.0]], dtype=torch.float64)
    p = torch.softmax(logits, -1)[0]
    v = output_vectors(logits, None, "classification", "type-2")[:, 0]
    torch.testing.assert_close(v.T @ v, torch.diag(p) - torch.outer(p, p))


@pytest.mark.parametrize("structure", ["diag", "bdiag"])
def test_gaussian_likelihood_gives_sigma_inv_sq_jtj(structure):
    net = tiny_mlp((1, 7, 7, 1))
    x = torch.linspace(-4, 4, 9, dtype=torch.float64).reshape(-1, 1)
    curvature = module_curvature(net, x, None, structure, likelihood="regression",
                                 noise_std=3.0, batch_size=4)
    jac = jacobian(net, x)[:, 0]
    expected = jac.T @ jac / 9.0
    if structure == "diag":
        torch.testing.assert_close(curvature.diagonal(), expected.diagonal())
    else:
        torch.testing.assert_close(curvature.to_dense(), expected * block_mask([14, 56, 8]))


def test_layout_is_pytorch_parameter_order_for_lenet5():
    net = lenet5()
    assert [layer.name for layer in curvature_layers(net)] == ["0", "3", "7", "9", "11"]
    assert flat_parameters(net).numel() == 61706
    torch.testing.assert_close(flat_parameters(net), parameters_to_vector(net.parameters()))


def test_other_parameterised_layers_are_rejected():
    net = nn.Sequential(nn.Linear(3, 4), nn.PReLU(), nn.Linear(4, 2))
    with pytest.raises(ConfigError, match="layer '1' \\(PReLU\\) has parameters"):
        module_curvature(net, torch.randn(5, 3), None, "diag")


def test_a_block_too_large_for_bdiag_is_one_line_naming_the_limit(problem):
    net, x, y = problem
    with pytest.raises(ConfigError, match="^method.structure=bdiag: layer '4' has 45 "
                                          "parameters .* at most 30 parameters$"):
        module_curvature(net, x, y, "bdiag", max_block_size=30)


def test_unknown_structure_names_the_key_and_choices(problem):
    net, x, y = problem
    with pytest.raises(ConfigError, match="^method.structure='full' is not valid; choose one "
                                          "of: diag, kfac, ekfac, bdiag$"):
        module_curvature(net, x, y, "full")


# A network with batch norm and a bias-free conv: the curvature covers the conv and linear
# weights (and the linear biases), batch norm stays at its values.
BN_SIZES = [18, 45, 18]


@pytest.fixture(scope="module")
def batchnorm_problem():
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(6, 1, 5, 5, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (6,), generator=generator)
    return tiny_batchnorm_net(), x, y


def batchnorm_state(net):
    return {k: v.clone() for k, v in net[1].state_dict().items()}


def test_batchnorm_layers_are_outside_the_curvature_layout(batchnorm_problem):
    net, _, _ = batchnorm_problem
    layers = curvature_layers(net)
    assert [(lay.name, lay.has_bias) for lay in layers] == [("0", False), ("5", True),
                                                             ("7", True)]
    expected = torch.cat([net[0].weight.flatten(), net[5].weight.flatten(), net[5].bias,
                          net[7].weight.flatten(), net[7].bias]).detach()
    torch.testing.assert_close(flat_parameters(net), expected, rtol=0, atol=0)


@pytest.mark.parametrize("fisher_type", ["type-2", "empirical"])
def test_batchnorm_net_diag_and_bdiag_are_the_dense_curvature(batchnorm_problem, fisher_type):
    net, x, y = batchnorm_problem
    dense = reference(net, x, y, fisher_type)
    assert dense.shape == (81, 81)
    diag = module_curvature(net, x, y, "diag", fisher_type=fisher_type, batch_size=4)
    torch.testing.assert_close(diag.diagonal(), dense.diagonal())
    bdiag = module_curvature(net, x, y, "bdiag", fisher_type=fisher_type, batch_size=4)
    torch.testing.assert_close(bdiag.to_dense(), dense * block_mask(BN_SIZES))


@pytest.mark.parametrize("fisher_type", ["type-2", "empirical"])
@pytest.mark.parametrize(("structure", "operator"),
                         [("kfac", KFACLinearOperator), ("ekfac", EKFACLinearOperator)])
def test_batchnorm_net_kfac_and_ekfac_equal_curvlinops_on_the_same_layers(
        batchnorm_problem, structure, operator, fisher_type):
    net, x, y = batchnorm_problem
    ours = module_curvature(net, x, y, structure, fisher_type=fisher_type, batch_size=4)
    named = dict(net.named_parameters())
    params = [named[n] for lay in curvature_layers(net) for n in lay.parameter_names]
    theirs = operator(net, nn.CrossEntropyLoss(reduction="sum"), params, [(x, y)],
                      fisher_type=fisher_type, separate_weight_and_bias=False,
                      check_deterministic=False)
    eye = torch.eye(ours.n_params, dtype=torch.float64)
    torch.testing.assert_close(ours.to_dense(), theirs @ eye)
    assert ours.biases == (False, True, True)


def test_bias_free_kfac_of_one_example_is_the_closed_form():
    # One input, one bias-free Linear layer: F = sum_c g_c g_c^T kron a a^T exactly, with
    # g_c = sqrt(p_c)(e_c - p) and A = a a^T (no appended 1).
    net = nn.Linear(3, 2, bias=False).double()
    x = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
    p = torch.softmax(net(x), -1).detach()[0]
    g_factor = torch.diag(p) - torch.outer(p, p)
    kfac = module_curvature(net, x, None, "kfac")
    torch.testing.assert_close(kfac.factors[0][0], torch.outer(x[0], x[0]))
    torch.testing.assert_close(kfac.factors[0][1], g_factor)
    torch.testing.assert_close(kfac.to_dense(), torch.kron(g_factor, torch.outer(x[0], x[0])))
    torch.testing.assert_close(module_curvature(net, x, None, "ekfac").to_dense(),
                               kfac.to_dense())


def test_curvature_runs_in_eval_mode_and_leaves_batchnorm_untouched(batchnorm_problem):
    net, x, y = batchnorm_problem
    before = batchnorm_state(net)
    net.train()
    try:
        diag = module_curvature(net, x, y, "diag", fisher_type="type-2")
        assert net.training
    finally:
        net.eval()
    for key, value in batchnorm_state(net).items():
        torch.testing.assert_close(value, before[key], rtol=0, atol=0)
    torch.testing.assert_close(diag.diagonal(), dense_ggn(net, x).diagonal())


def test_resnet18_curvature_layout_leaves_out_its_batchnorm_parameters():
    from torchvision.models import resnet18

    with torch.device("meta"):
        net = resnet18(num_classes=10)
    layers = curvature_layers(net)
    # 20 bias-free convs and the 512->10 head; 11,181,642 parameters minus 9,600 in batch norm
    # (64 x 2 in the stem, 4 x 64 x 2, 5 x 128 x 2, 5 x 256 x 2, 5 x 512 x 2 in the stages).
    assert len(layers) == 21 and [lay.has_bias for lay in layers] == [False] * 20 + [True]
    assert sum(lay.n_params for lay in layers) == 11_181_642 - 9_600
