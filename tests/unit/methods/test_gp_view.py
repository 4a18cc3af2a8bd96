"""The GP view of the Laplace-GGN (GGN thesis section 5.3, notes section 6) against dense
brute-force computations on tiny float64 networks: Jacobians and kernel from per-input autograd,
importances in closed form, the identity m + K a = f - J grad L / delta at any theta, and the
self-check f = m + K a to 1e-8 at a stationary MAP."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.contracts.method import Method
from bench.curvature.jacobians import flat_parameters, output_jacobians
from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.methods.laplace.gp_view import (
    GaussianProcessView,
    bernoulli_residuals,
    ggn_kernel,
    self_check_error,
)
from bench.models.classifiers import TwoClassLogits

DELTA = 2.0


def tiny_conv_logit_net(seed: int = 0) -> nn.Module:
    """Conv(1->2, 3x3, pad 1) -> ReLU -> MaxPool 2 -> Linear(8, 4) -> Tanh -> Linear(4, 1):
    61 parameters, float64, inputs ``[n, 1, 4, 4]``."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8, 4), nn.Tanh(), nn.Linear(4, 1)).double()


def tiny_mlp_logit_net(seed: int = 0) -> nn.Module:
    """2 -> 4 (tanh) -> 1 with biases: 17 parameters, float64, a smooth MAP objective."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1)).double()


def brute_force_jacobians(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """One ``torch.autograd.grad`` per input, flattened in parameter order."""
    rows = []
    for xi in x:
        grads = torch.autograd.grad(net(xi.unsqueeze(0)).reshape(()), list(net.parameters()))
        rows.append(torch.cat([g.reshape(-1) for g in grads]))
    return torch.stack(rows)


def map_objective(net: nn.Module, x: torch.Tensor, y: torch.Tensor, delta: float):
    """``sum_i BCE(y_i, f_i) + (delta / 2) |theta|^2`` (the thesis' MAP objective)."""
    f = net(x).reshape(-1)
    penalty = sum(p.pow(2).sum() for p in net.parameters())
    return F.binary_cross_entropy_with_logits(f, y.double(), reduction="sum") + delta / 2 * penalty


def train_to_stationarity(net: nn.Module, x, y, delta: float) -> float:
    """L-BFGS, then Newton steps with the exact Hessian, in float64, until the gradient of
    the MAP objective vanishes; returns the final gradient norm."""
    optimizer = torch.optim.LBFGS(net.parameters(), lr=1.0, max_iter=500, history_size=50,
                                  tolerance_grad=1e-12, tolerance_change=0.0,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = map_objective(net, x, y, delta)
        loss.backward()
        return loss

    optimizer.step(closure)
    names = [name for name, _ in net.named_parameters()]
    shapes = [p.shape for p in net.parameters()]

    def objective(theta: torch.Tensor) -> torch.Tensor:
        values = dict(zip(names, theta.split([s.numel() for s in shapes]), strict=True))
        values = {k: v.reshape(s) for (k, v), s in zip(values.items(), shapes, strict=True)}
        f = torch.func.functional_call(net, values, (x,)).reshape(-1)
        return (F.binary_cross_entropy_with_logits(f, y.double(), reduction="sum")
                + delta / 2 * theta.pow(2).sum())

    theta = flat_parameters(net)
    for _ in range(5):
        gradient = torch.func.grad(objective)(theta)
        theta = theta - torch.linalg.solve(torch.func.hessian(objective)(theta), gradient)
    torch.nn.utils.vector_to_parameters(theta, net.parameters())
    return float(torch.func.grad(objective)(theta).norm())


def toy_binary_data(n: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=generator, dtype=torch.float64)
    y = (x[:, 0] + 0.5 * x[:, 1] + 0.7 * torch.randn(n, generator=generator,
                                                     dtype=torch.float64) > 0).long()
    return x, y


def test_importances_are_bernoulli_residuals():
    f = torch.tensor([0.0, 0.0, 2.0, -1.0], dtype=torch.float64)
    y = torch.tensor([1, 0, 1, 1])
    expected = torch.tensor([0.5, -0.5, 1 - 1 / (1 + torch.e ** -2), 1 - 1 / (1 + torch.e)],
                            dtype=torch.float64)
    assert torch.allclose(bernoulli_residuals(y, f), expected, atol=1e-15, rtol=0)


def test_jacobians_and_kernel_match_per_input_autograd():
    net = tiny_conv_logit_net()
    generator = torch.Generator().manual_seed(1)
    x_train = torch.randn(7, 1, 4, 4, generator=generator, dtype=torch.float64)
    x_test = torch.randn(3, 1, 4, 4, generator=generator, dtype=torch.float64)
    dense_train, dense_test = brute_force_jacobians(net, x_train), brute_force_jacobians(net,
                                                                                      x_test)
    jacobians = output_jacobians(net, x_train)
    assert jacobians.shape == (7, 61)
    assert torch.allclose(jacobians, dense_train, atol=1e-12, rtol=0)
    assert torch.allclose(output_jacobians(net, x_train, batch_size=3), jacobians, atol=1e-14,
                          rtol=0)
    kernel = ggn_kernel(output_jacobians(net, x_test), jacobians, DELTA)
    loops = torch.tensor([[float(dense_test[i] @ dense_train[j]) / DELTA for j in range(7)]
                          for i in range(3)], dtype=torch.float64)
    assert torch.allclose(kernel, loops, atol=1e-12, rtol=0)
    assert flat_parameters(net).shape == (61,)


def test_gp_mean_differs_from_the_network_by_the_map_gradient_at_any_theta():
    """m + K a = f - J(x*) grad L / delta for every theta: the self-check's error term."""
    net = tiny_conv_logit_net(seed=3)
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(9, 1, 4, 4, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 2, (9,), generator=generator)
    x_test = torch.randn(4, 1, 4, 4, generator=generator, dtype=torch.float64)
    view = GaussianProcessView(prior_precision=DELTA)
    diagnostics = view.fit(TrainingSet(x, y), seed=0, base=net)
    terms = view.explain(x_test)
    grads = torch.autograd.grad(map_objective(net, x, y, DELTA), list(net.parameters()))
    gradient = torch.cat([g.reshape(-1) for g in grads])
    j_test = brute_force_jacobians(net, x_test)
    with torch.no_grad():
        f = net(x_test).reshape(-1)
    assert torch.allclose(terms.f, f, atol=1e-14, rtol=0)
    assert torch.allclose(terms.offset, f - j_test @ flat_parameters(net), atol=1e-12, rtol=0)
    assert torch.allclose(terms.gp_mean, f - j_test @ gradient / DELTA, atol=1e-10, rtol=0)
    theta = flat_parameters(net)
    assert diagnostics["relative_gradient_norm"] == pytest.approx(
        float(gradient.norm() / (DELTA * theta.norm())), rel=1e-10)
    assert diagnostics["gradient_norm"] == pytest.approx(float(gradient.norm()), rel=1e-10)
    assert diagnostics["map_objective"] == pytest.approx(
        float(map_objective(net, x, y, DELTA).detach()), rel=1e-12)
    # A random network is far from stationary: the check is not trivially satisfied.
    assert self_check_error(terms.f, terms.gp_mean) > 1e-2
    with torch.no_grad():
        f_train = net(x).reshape(-1)
    assert torch.allclose(view.importances, y.double() - torch.sigmoid(f_train), atol=1e-15)
    assert diagnostics["n_params"] == 61 and diagnostics["n_train"] == 9


@pytest.mark.second_tier
def test_self_check_holds_to_1e_8_at_a_stationary_map():
    x, y = toy_binary_data(40, seed=5)
    x_test, _ = toy_binary_data(25, seed=6)
    net = tiny_mlp_logit_net(seed=7)
    assert train_to_stationarity(net, x, y, DELTA) < 1e-10
    view = GaussianProcessView(prior_precision=DELTA, batch_size=16)
    diagnostics = view.fit(TrainingSet(x, y), seed=0, base=TwoClassLogits(net))
    assert diagnostics["relative_gradient_norm"] < 1e-10
    assert diagnostics["gradient_norm"] < 1e-9
    terms = view.explain(x_test)
    # Eq. 5.2 with the offset: f(x*) = m(x*) + sum_i a_i kappa(x*, x_i), each term by brute force.
    j_train, j_test = brute_force_jacobians(net, x), brute_force_jacobians(net, x_test)
    with torch.no_grad():
        f_train, f_test = net(x).reshape(-1), net(x_test).reshape(-1)
    importances = y.double() - torch.sigmoid(f_train)
    by_sum = torch.stack([
        f_test[i] - j_test[i] @ flat_parameters(net)
        + sum(importances[n] * (j_test[i] @ j_train[n]) / DELTA for n in range(len(x)))
        for i in range(len(x_test))])
    assert torch.allclose(by_sum, f_test, atol=1e-8, rtol=0)
    assert torch.allclose(terms.gp_mean, f_test, atol=1e-8, rtol=0)
    assert self_check_error(terms.f, terms.gp_mean) < 1e-8
    probs = view.predict(x_test).probs
    assert torch.allclose(probs[:, 1], torch.sigmoid(f_test), atol=1e-8, rtol=0)
    assert torch.allclose(probs.sum(1), torch.ones(len(x_test), dtype=torch.float64))


class PooledPair(nn.Module):
    """``f(x) = maxpool(w_1 x, w_2 x) + b`` for scalar inputs ``[n, 1]``: the smallest network
    with a max-pool, three float64 parameters."""

    def __init__(self, w1: float, w2: float, b: float) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor([w1, w2], dtype=torch.float64))
        self.b = nn.Parameter(torch.tensor([b], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool1d((x * self.w).unsqueeze(1), 2).reshape(len(x), 1) + self.b


def pooled_pair_minimiser(n: int, positives: int, delta: float) -> PooledPair:
    """The minimiser of ``sum BCE + (delta / 2) |theta|^2`` over :class:`PooledPair` on ``n``
    inputs x = 1 with ``positives`` labels 1, in closed form up to a 1-D root.

    Every logit is ``f = max(w_1, w_2) + b``. For the best f, the prior term is smallest at
    ``w_1 = w_2 = f / 3, b = 2 f / 3`` when f < 0 (both weights must reach max = f / 3: a
    max-pool tie) and at ``w_1 = b = f / 2, w_2 = 0`` when f > 0; f then solves
    ``n s(f) - positives + delta c f = 0`` (c = 2/3 resp. 1/2), the derivative in b."""
    share = 2 / 3 if 2 * positives < n else 1 / 2
    low, high = -50.0, 50.0
    for _ in range(200):
        f = (low + high) / 2
        if n / (1 + math.exp(-f)) - positives + delta * share * f > 0:
            high = f
        else:
            low = f
    f = (low + high) / 2
    if 2 * positives < n:
        return PooledPair(f / 3, f / 3, 2 * f / 3)
    return PooledPair(f / 2, 0.0, f / 2)


@pytest.mark.parametrize("positives", [3, 7])
def test_at_a_max_pool_tie_the_minimiser_keeps_a_gradient_and_the_self_check_fails(positives):
    """Why the self-check needs a differentiable stationary point (Figure 5.6's CNN has
    max-pools): with 3 positives of 10 the minimiser sits on the tie w_1 = w_2 = m = f / 3,
    autograd's gradient there is (-delta m, delta m, 0) in some order, not 0, and the GP view
    gives m + K a = 4m against f = 3m, a relative error of exactly 1/3; with 7 positives the
    minimiser is off the tie, stationary, and the self-check holds."""
    n, x = 10, torch.ones(10, 1, dtype=torch.float64)
    y = (torch.arange(n) < positives).long()
    net = pooled_pair_minimiser(n, positives, DELTA)
    objective = float(map_objective(net, x, y, DELTA).detach())
    theta = flat_parameters(net)
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        step = torch.randn(3, generator=generator, dtype=torch.float64)
        torch.nn.utils.vector_to_parameters(theta + 1e-3 * step / step.norm(), net.parameters())
        assert float(map_objective(net, x, y, DELTA).detach()) >= objective - 1e-12
    torch.nn.utils.vector_to_parameters(theta, net.parameters())

    view = GaussianProcessView(prior_precision=DELTA)
    diagnostics = view.fit(TrainingSet(x, y), seed=0, base=net)
    terms = view.explain(torch.ones(1, 1, dtype=torch.float64))
    tied = 2 * positives < n
    m = float(theta[0])
    if tied:
        assert diagnostics["gradient_norm"] == pytest.approx(2 ** 0.5 * DELTA * abs(m), rel=1e-9)
        assert float(terms.f) == pytest.approx(3 * m, rel=1e-12)
        assert float(terms.gp_mean) == pytest.approx(4 * m, rel=1e-9)
        assert self_check_error(terms.f, terms.gp_mean) == pytest.approx(1 / 3, rel=1e-9)
    else:
        assert diagnostics["gradient_norm"] < 1e-9
        assert self_check_error(terms.f, terms.gp_mean) < 1e-9


def test_the_view_follows_the_method_contract_and_checks_its_inputs():
    view = GaussianProcessView()
    assert isinstance(view, Method) and view.fits_on_base
    for value in (0, -1.0):
        with pytest.raises(ConfigError, match="method.prior_precision=") as caught:
            GaussianProcessView(prior_precision=value)
        assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="method.batch_size"):
        GaussianProcessView(batch_size=0)
    with pytest.raises(RuntimeError, match="call fit"):
        view.explain(torch.zeros(1, 2))
    x, _ = toy_binary_data(4, seed=0)
    with pytest.raises(ValueError, match="labels in"):
        view.fit(TrainingSet(x, torch.tensor([0, 1, 2, 1])), 0, base=tiny_mlp_logit_net())
