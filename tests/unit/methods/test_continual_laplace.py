"""The running Laplace posterior of continual learning against closed forms: the penalty is the
Gaussian log density, ``fit(override=False)`` adds the tasks' exact GGNs (diag) or laplace-torch's
count-weighted Kronecker factors (K-FAC), the prior update reaches the marginal likelihood's
stationary point; stored states round-trip and a killed run resumes to the same numbers."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.optimize import brentq
from torch import Tensor, nn
from torch.distributions import MultivariateNormal, Normal
from torch.func import functional_call, jacrev, vmap
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.data import DataLoader, TensorDataset

import bench.methods.laplace.continual as continual
from bench.datasets.continual_tasks import permuted_task
from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.laplace.classification import LaplaceTorchClassifier
from bench.methods.laplace.continual import (
    ContinualLaplace,
    load_posterior_state,
    negative_log_posterior,
    posterior_state,
    tuned_prior_precision,
)

pytest.importorskip("laplace")

N_CLASSES = 3
DELTA = 0.5


def tiny_network() -> nn.Module:
    """Linear 4 -> 3, ReLU, Linear 3 -> 3 in float64 (27 parameters)."""
    generator = make_generator(3)
    network = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, N_CLASSES)).double()
    with torch.no_grad():
        for p in network.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64))
    return network


def task_data(seed: int, n: int) -> tuple[Tensor, Tensor]:
    generator = make_generator(seed)
    return (torch.randn(n, 4, generator=generator, dtype=torch.float64),
            torch.randint(0, N_CLASSES, (n,), generator=generator))


def loader(x: Tensor, y: Tensor) -> DataLoader:
    return DataLoader(TensorDataset(x, y), batch_size=7)


def running_posterior(network: nn.Module, structure: str, prior: float = DELTA):
    """The posterior ContinualLaplace builds: laplace-torch, all weights, AsdlGGN, mean 0."""
    adapter = LaplaceTorchClassifier(subset_of_weights="all", hessian_structure=structure,
                                     backend="AsdlGGN", prior_precision=prior)
    n_params = sum(p.numel() for p in network.parameters())
    return adapter.build_laplace(network, prior_mean=torch.zeros(n_params, dtype=torch.float64))


def exact_ggn(network: nn.Module, x: Tensor) -> Tensor:
    """``sum_n J_n^T (diag(p_n) - p_n p_n^T) J_n`` over the weights in laplace-torch's order,
    from per-example Jacobians (torch.func)."""
    names = [name for name, _ in network.named_parameters()]
    shapes = [p.shape for p in network.parameters()]
    theta = parameters_to_vector(network.parameters()).detach()

    def logits(flat: Tensor, xi: Tensor) -> Tensor:
        pieces = flat.split([math.prod(s) for s in shapes])
        state = {n: p.view(s) for n, p, s in zip(names, pieces, shapes, strict=True)}
        return functional_call(network, state, (xi.unsqueeze(0),)).squeeze(0)

    jacobians = vmap(jacrev(logits), in_dims=(None, 0))(theta, x)
    with torch.no_grad():
        probs = torch.softmax(network(x), dim=-1)
    curvature = torch.diag_embed(probs) - probs[:, :, None] * probs[:, None, :]
    return torch.einsum("ncp,ncd,ndq->pq", jacobians, curvature, jacobians)


def dense_kron(la) -> Tensor:
    """The K-FAC curvature as a dense matrix, built here from the stored factors: a weight's
    block is ``kron(B_out, A_in)`` (row-major weights), a bias block is its one factor."""
    blocks = [torch.kron(*factors) if len(factors) == 2 else factors[0]
              for factors in la.H_facs.kfacs]
    return torch.block_diag(*blocks)


def set_weights(network: nn.Module, theta: Tensor) -> None:
    with torch.no_grad():
        vector_to_parameters(theta, network.parameters())


def moved_weights(network: nn.Module, seed: int, scale: float = 0.3) -> Tensor:
    theta = parameters_to_vector(network.parameters()).detach()
    return theta + scale * torch.randn(theta.shape, generator=make_generator(seed),
                                       dtype=theta.dtype)


@pytest.mark.parametrize("structure", ["diag", "kron"])
def test_penalty_before_any_task_is_the_prior_log_density(structure):
    network = tiny_network()
    la = running_posterior(network, structure)
    theta = parameters_to_vector(network.parameters()).detach()
    scale = torch.tensor(DELTA, dtype=torch.float64).rsqrt()
    prior = Normal(torch.zeros((), dtype=torch.float64), scale).log_prob(theta).sum()
    penalty = negative_log_posterior(la, network).detach()
    assert float(-penalty) == pytest.approx(float(prior), rel=1e-12)


@pytest.mark.parametrize("structure", ["diag", "kron"])
def test_penalty_is_the_closed_form_gaussian_log_density(structure):
    network = tiny_network()
    la = running_posterior(network, structure)
    x, y = task_data(0, 30)
    la.fit(loader(x, y), override=False)
    curvature = torch.diag(la.H) if structure == "diag" else dense_kron(la)
    precision = curvature + DELTA * torch.eye(len(curvature), dtype=torch.float64)
    theta = moved_weights(network, 1)
    set_weights(network, theta)
    penalty = negative_log_posterior(la, network)
    value = float(-penalty.detach())
    expected = MultivariateNormal(la.mean, precision_matrix=precision).log_prob(theta)
    assert value == pytest.approx(float(expected), rel=1e-10)
    assert value == pytest.approx(float(la.log_prob(theta)), rel=1e-12)
    gradient, = torch.autograd.grad(penalty, list(network.parameters())[0])
    expected_gradient = (precision @ (theta - la.mean))[:gradient.numel()]
    assert torch.allclose(gradient.flatten(), expected_gradient, rtol=1e-9, atol=1e-12)


def test_kfac_of_one_example_is_its_exact_ggn_per_parameter_block():
    network = tiny_network()
    la = running_posterior(network, "kron")
    x, y = task_data(0, 1)
    la.fit(loader(x, y))
    exact, start = exact_ggn(network, x), 0
    for parameter in network.parameters():  # one block per weight and per bias
        end = start + parameter.numel()
        assert torch.allclose(dense_kron(la)[start:end, start:end], exact[start:end, start:end],
                              rtol=1e-10, atol=1e-12)
        start = end
    assert exact[:12, 12:].abs().max() > 1e-3  # K-FAC drops the blocks between parameters


def test_diag_override_false_adds_the_exact_ggns_of_two_tasks():
    network = tiny_network()
    la = running_posterior(network, "diag")
    first, second = task_data(0, 30), task_data(1, 20)
    theta_first = parameters_to_vector(network.parameters()).detach().clone()
    ggn_first = torch.diag(exact_ggn(network, first[0]))
    la.fit(loader(*first), override=False)
    alone_first = la.H.clone()
    set_weights(network, moved_weights(network, 2))
    ggn_second = torch.diag(exact_ggn(network, second[0]))
    la.fit(loader(*second), override=False)
    assert torch.allclose(alone_first, ggn_first, rtol=1e-10, atol=1e-12)
    assert torch.allclose(la.H, ggn_first + ggn_second, rtol=1e-10, atol=1e-12)
    alone_second = running_posterior(network, "diag")
    alone_second.fit(loader(*second))
    assert torch.allclose(la.H, alone_first + alone_second.H, rtol=1e-12, atol=1e-14)
    assert la.n_data == 50
    assert torch.equal(la.mean, parameters_to_vector(network.parameters()).detach())
    assert not torch.equal(la.mean, theta_first)


def test_kfac_override_false_weights_the_input_factors_by_data_counts():
    network = tiny_network()
    first, second = task_data(0, 30), task_data(1, 20)
    alone = []
    for data in (first, second):
        single = running_posterior(network, "kron")
        single.fit(loader(*data))
        alone.append(single.H_facs.kfacs)
    la = running_posterior(network, "kron")
    la.fit(loader(*first), override=False)
    la.fit(loader(*second), override=False)
    for k, factors in enumerate(la.H_facs.kfacs):
        assert torch.allclose(factors[0], alone[0][k][0] + alone[1][k][0], rtol=1e-12)
        if len(factors) == 2:
            weighted = (30 * alone[0][k][1] + 20 * alone[1][k][1]) / 50
            assert torch.allclose(factors[1], weighted, rtol=1e-12)


def test_prior_update_reaches_the_stationary_point_of_the_marginal_likelihood():
    network = tiny_network()
    la = running_posterior(network, "diag", prior=1e-3)
    first, second = task_data(0, 30), task_data(1, 20)
    la.fit(loader(*first), override=False)
    previous_map = la.mean.clone()
    set_weights(network, moved_weights(network, 4, scale=0.05))
    theta = parameters_to_vector(network.parameters()).detach()
    curvature = la.H + torch.diag(exact_ggn(network, second[0]))
    squared = float((theta - previous_map).pow(2).sum())
    n_params = len(theta)

    def gradient(log_delta: float) -> float:  # d/d delta of -2 log marglik, times delta
        delta = math.exp(log_delta)
        return delta * float((1 / (curvature + delta)).sum()) + delta * squared - n_params

    optimum = math.exp(brentq(gradient, -20.0, 20.0))
    tuned, negative = tuned_prior_precision(la, loader(*second), init=optimum * math.e,
                                            steps=300, lr=0.1)
    assert float(tuned) == pytest.approx(optimum, rel=1e-3)
    assert math.isfinite(negative)
    assert float(la.prior_precision) == pytest.approx(1e-3)  # the running posterior is untouched
    assert torch.equal(la.mean, previous_map) and la.n_data == 30


@pytest.mark.parametrize("structure", ["diag", "kron"])
def test_stored_posterior_state_round_trips(structure):
    network = tiny_network()
    la = running_posterior(network, structure)
    la.fit(loader(*task_data(0, 30)), override=False)
    la.prior_precision = torch.tensor([0.8], dtype=torch.float64)
    state = posterior_state(la)
    again = running_posterior(tiny_network(), structure, prior=3.0)
    load_posterior_state(again, state)
    theta = moved_weights(network, 5)
    assert float(again.log_prob(theta)) == pytest.approx(float(la.log_prob(theta)), rel=1e-13)
    assert float(again.log_marginal_likelihood()) == pytest.approx(
        float(la.log_marginal_likelihood()), rel=1e-13)
    assert again.n_data == 30 and float(again.prior_precision) == pytest.approx(0.8)
    again.fit(loader(*task_data(1, 10)), override=False)  # accumulating must not touch state
    assert torch.equal(posterior_state(la)["mean"], state["mean"])
    assert all(torch.equal(a, b) for a, b in zip(
        _flat(posterior_state(la)["H"]), _flat(state["H"]), strict=True))


def _flat(value) -> list[Tensor]:
    if isinstance(value, Tensor):
        return [value]
    return [t for item in value for t in _flat(item)]


def test_bad_settings_stop_with_one_line_naming_the_key():
    with pytest.raises(ConfigError, match=r"method.hessian_structure='full' is not valid; "
                                          r"choose one of: kron, diag"):
        ContinualLaplace(hessian_structure="full")
    for bad in (0.0, -1e-3, math.inf):
        with pytest.raises(ConfigError, match=r"method.prior_precision=.* must be a finite "
                                              r"number > 0"):
            ContinualLaplace(prior_precision=bad)
    with pytest.raises(ConfigError, match="method.backend='Nope'"):
        ContinualLaplace(backend="Nope")
    with pytest.raises(ConfigError, match="method.marglik_every=0"):
        ContinualLaplace(marglik_every=0)


# A killed run resumes to the same numbers, at task and at epoch granularity.

def tasks_of(results: str, n_tasks: int = 3) -> list[TrainingSet]:
    generator = make_generator(11)
    images = torch.rand(40, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (40,), generator=generator)
    return [TrainingSet(permuted_task(images, t), labels, f"random_permuted_{t}", "unit",
                        results) for t in range(n_tasks)]


def small_method(structure: str) -> ContinualLaplace:
    return ContinualLaplace(hessian_structure=structure, epochs=2, batch_size=16,
                            marglik_every=1, marglik_steps=3, prediction={"batch_size": 8})


def finished(method: ContinualLaplace) -> dict[str, Tensor]:
    state = {f"network.{k}": v for k, v in method.network.state_dict().items()}
    posterior = posterior_state(method.la)
    state.update({f"posterior.{k}.{i}": t for k in ("mean", "H", "prior_precision")
                  for i, t in enumerate(_flat(posterior[k]))})
    probe = tasks_of("unused")[2].train_inputs[:6]
    state["predictive"] = method.predict(probe).probs
    return state


def assert_same(first: dict[str, Tensor], second: dict[str, Tensor]) -> None:
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), key


@pytest.mark.second_tier
@pytest.mark.parametrize("structure", ["diag", "kron"])
def test_a_rerun_loads_finished_tasks_and_gives_the_same_posterior(structure, tmp_path):
    whole = small_method(structure)
    diagnostics = [whole.fit(task, seed=5) for task in tasks_of(str(tmp_path / "a"))]
    assert [d["task"] for d in diagnostics] == [1, 2, 3]
    assert all(len(d["tuned_prior_precisions"]) == 2 for d in diagnostics)
    assert whole.la.n_data == 120
    reference = finished(whole)
    first_two = small_method(structure)
    for task in tasks_of(str(tmp_path / "b"))[:2]:
        first_two.fit(task, seed=5)
    resumed = small_method(structure)
    reused = [resumed.fit(task, seed=5)["state_reused"] for task in tasks_of(str(tmp_path / "b"))]
    assert reused == [True, True, False]
    assert_same(finished(resumed), reference)
    other_seed = small_method(structure)
    for task in tasks_of(str(tmp_path / "a")):
        other_seed.fit(task, seed=6)
    assert not torch.equal(other_seed.la.mean, whole.la.mean)


class Killed(Exception):
    """Stands for a kill in the middle of a task."""


@pytest.mark.second_tier
def test_a_run_killed_mid_task_resumes_from_its_epoch_checkpoint(tmp_path, monkeypatch):
    reference = small_method("kron")
    for task in tasks_of(str(tmp_path / "a")):
        reference.fit(task, seed=5)
    calls = []
    real = continual.tuned_prior_precision

    def killing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:  # task 2, after epoch 2 (epoch 1's checkpoint is saved)
            raise Killed
        return real(*args, **kwargs)

    monkeypatch.setattr(continual, "tuned_prior_precision", killing)
    killed = small_method("kron")
    with pytest.raises(Killed):
        for task in tasks_of(str(tmp_path / "b")):
            killed.fit(task, seed=5)
    partial = list((tmp_path / "b" / "states" / "continual_laplace").glob("*/*/*.partial"))
    assert [p.parent.parent.name for p in partial] == ["random_permuted_1"]
    assert (partial[0] / "checkpoint.pt").exists()
    monkeypatch.setattr(continual, "tuned_prior_precision", real)
    resumed = small_method("kron")
    for task in tasks_of(str(tmp_path / "b")):
        resumed.fit(task, seed=5)
    assert_same(finished(resumed), finished(reference))
