"""The project's VOGGN, LGVA and OGGN step (``ggn_pseudo_data`` + ``natural_gradient_step``,
and one iteration of ``run_natural_gradient_vi``) against a reference written from the GGN
thesis's equations (:mod:`tests.unit.methods.ggn_step_reference`: eq. 4.1-4.12, Table 4.2) on
nonlinear networks, where the Jacobian depends on the point it is taken at, so a ``J`` or ``f``
taken at the wrong point (the draw, the mean, the linearisation) changes the step.

Cases: a 1-10-1 tanh network and a 2-6-5-1 network (tanh, then sigmoid), Gaussian and
Bernoulli likelihoods, a random state (mean ~ N(0, 0.8^2), a random dense precision) and a far
state (mean ~ N(0, 5^2): saturated units, large outputs). Both sides get the same mean,
precision, step size, prior precision and Monte Carlo draw: the project draws
``theta_s = mu + L^-T z`` with ``L`` the Cholesky factor of the precision and ``z`` ``[P, S]``
from its generator (notes section 5 [R]); the test rebuilds that draw from a generator with the
same seed and hands it to the reference, in the reference's own parameter layout.

Agreement is to :data:`TOLERANCE` in float64, the largest absolute difference of the mean and of
the precision after one step (measured: at most 9e-13, on the 1-10-1 network's far state with
the Gaussian likelihood, whose precision has entries up to 2.5e3; at most 7e-14 in the other
cases). Each mutant of the reference (one ``J`` or ``f`` moved to the wrong point) is shown to
differ from the project's step by more than :data:`MUTANT_SEPARATION` (measured: at least
3e-5, on the 1-10-1 network's far state with the Bernoulli likelihood, where the saturated
outputs make ``r`` and ``Lambda`` hardly depend on ``f``; 0.15 or more in the other cases).
Changing the project's rules the same way (VOGGN's ``J`` at the mean, LGVA's ``f`` at the draw,
OGGN's ``J`` at a draw) fails that algorithm's 12 equality tests (checked by hand).
"""

from __future__ import annotations

import pytest
import torch

from bench.methods.variational.ggn_natural_gradient import (
    NaturalGradientSchedule,
    NaturalGradientState,
    ggn_pseudo_data,
    natural_gradient_step,
    run_natural_gradient_vi,
)
from bench.models.glm_likelihoods import BernoulliLikelihood, GaussianLikelihood
from bench.models.mlp import MLPShape
from tests.unit.methods.ggn_step_reference import (
    REFERENCE_RULES,
    ReferenceMLP,
    bernoulli_likelihood,
    gaussian_likelihood,
    mutant_jacobian_at_draw_function_at_mean,
    mutant_jacobian_at_mean_function_at_draw,
    mutant_linearised_with_jacobian_at_draw,
    reference_step,
)

TOLERANCE = 1e-10
MUTANT_SEPARATION = 1e-7  # a thousand times the tolerance
NOISE_VARIANCE = 0.3
PRIOR_PRECISION = 0.9
STEP_SIZE = 0.7  # below 1, so that the (1 - gamma) terms of eq. 4.2-4.3 count
MC_SAMPLES = 3
N_POINTS = 12
NETWORKS = {
    "1-10-1-tanh": (MLPShape((1, 10, 1), "tanh"), ReferenceMLP((1, 10, 1), (torch.tanh,))),
    "2-6-5-1-tanh-sigmoid": (MLPShape((2, 6, 5, 1), ("tanh", "sigmoid")),
                             ReferenceMLP((2, 6, 5, 1), (torch.tanh, torch.sigmoid))),
}
LIKELIHOODS = {
    "gaussian": (GaussianLikelihood(NOISE_VARIANCE), gaussian_likelihood(NOISE_VARIANCE)),
    "bernoulli": (BernoulliLikelihood(), bernoulli_likelihood()),
}
MEAN_SCALES = {"random": 0.8, "far": 5.0}
# Each algorithm's mutants: the reference with one J or f taken at the wrong point.
MUTANTS = {
    "voggn": {"J at the mean": mutant_jacobian_at_mean_function_at_draw,
              "f at the mean": mutant_jacobian_at_draw_function_at_mean},
    "lgva": {"f at the draw, not linearised": mutant_jacobian_at_mean_function_at_draw,
             "J at the draw": mutant_linearised_with_jacobian_at_draw},
    "oggn": {"J at the draw": mutant_jacobian_at_draw_function_at_mean,
             "f at the draw": mutant_jacobian_at_mean_function_at_draw},
}
CASES = [(network, likelihood, state) for network in NETWORKS for likelihood in LIKELIHOODS
         for state in MEAN_SCALES]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def seeded(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed``."""
    return torch.Generator().manual_seed(seed)


def case_seed(network: str, likelihood: str, state: str) -> int:
    """A fixed seed per case (Python's ``hash`` of a string changes between runs)."""
    return (100 * list(NETWORKS).index(network) + 10 * list(LIKELIHOODS).index(likelihood)
            + list(MEAN_SCALES).index(state))


def data(network: str, likelihood: str, generator: torch.Generator):
    """``N_POINTS`` inputs ``x ~ N(0, 1.5^2 I)`` and targets: ``sin(2 x_1)`` plus noise for the
    Gaussian, fair coin flips for the Bernoulli likelihood."""
    d_in = NETWORKS[network][0].widths[0]
    x = 1.5 * torch.randn(N_POINTS, d_in, generator=generator, dtype=torch.float64)
    if likelihood == "gaussian":
        noise = torch.randn(N_POINTS, generator=generator, dtype=torch.float64)
        return x, torch.sin(2 * x[:, 0]) + NOISE_VARIANCE**0.5 * noise
    return x, (torch.rand(N_POINTS, generator=generator, dtype=torch.float64) < 0.5).double()


def random_state(n_params: int, mean_scale: float,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean ``mean_scale * N(0, I)`` and a dense precision ``A A^T / P + 0.5 I``, ``A`` with
    standard normal entries (eigenvalues about 0.5 to 4.5)."""
    mean = mean_scale * torch.randn(n_params, generator=generator, dtype=torch.float64)
    factor = torch.randn(n_params, n_params, generator=generator, dtype=torch.float64)
    precision = factor @ factor.T / n_params + 0.5 * torch.eye(n_params, dtype=torch.float64)
    return mean, precision


def draws_as_the_project_makes_them(mean: torch.Tensor, precision: torch.Tensor, seed: int,
                                    n_draws: int) -> torch.Tensor:
    """``theta_s = mu + L^-T z_s`` ``[S, P]``, ``L L^T`` the precision, ``z`` ``[P, S]``
    standard normal from a generator seeded with ``seed`` (the project's convention)."""
    z = torch.randn(mean.shape[0], n_draws, generator=seeded(seed), dtype=torch.float64)
    cholesky = torch.linalg.cholesky(precision)
    return mean + torch.linalg.solve_triangular(cholesky.T, z, upper=True).T


def largest_difference(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """``max |actual - expected|`` over the entries."""
    assert actual.shape == expected.shape
    return float((actual - expected).abs().max())


def project_step(algorithm: str, network: str, likelihood: str, x, y, mean, precision,
                 seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The project's step from ``N(mean, precision^-1)``, draws from ``seeded(seed)``."""
    state = NaturalGradientState(mean, precision, torch.linalg.cholesky(precision))
    shape, model = NETWORKS[network][0], LIKELIHOODS[likelihood][0]
    with torch.no_grad():
        f_hat, jacobians = ggn_pseudo_data(algorithm, shape, state, x, MC_SAMPLES,
                                           seeded(seed))
        new = natural_gradient_step(state, f_hat, jacobians, y, model, PRIOR_PRECISION,
                                    STEP_SIZE)
    return new.mean, new.precision


def in_reference_layout(network: str, mean: torch.Tensor,
                        precision: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A mean and precision in the project's (``nn.Linear``) layout, permuted into the
    reference's."""
    perm = NETWORKS[network][1].from_torch_linear_order()
    return mean[perm], precision[perm][:, perm]


def both_steps(algorithm: str, network: str, likelihood: str, state: str, rule=None):
    """The project's step and the reference's (with ``rule``, default the algorithm's own)
    from the case's state with the same draw, both in the reference's layout: the largest
    differences of the mean and of the precision."""
    seed = case_seed(network, likelihood, state)
    generator = seeded(seed)
    x, y = data(network, likelihood, generator)
    shape, reference_mlp = NETWORKS[network]
    mean, precision = random_state(shape.n_params, MEAN_SCALES[state], generator)
    draw_seed = seed + 1000
    project_mean, project_precision = in_reference_layout(
        network, *project_step(algorithm, network, likelihood, x, y, mean, precision,
                               draw_seed))
    draws = draws_as_the_project_makes_them(mean, precision, draw_seed, MC_SAMPLES)
    if rule is None and algorithm == "oggn":
        draws = mean.unsqueeze(0)  # S = 1, no draw (eq. 4.11-4.12); a mutant uses the draws
    ref_mean, ref_precision = in_reference_layout(network, mean, precision)
    perm = reference_mlp.from_torch_linear_order()
    expected_mean, expected_precision = reference_step(
        rule or REFERENCE_RULES[algorithm], reference_mlp, LIKELIHOODS[likelihood][1], x, y,
        ref_mean, ref_precision, draws[:, perm], STEP_SIZE, PRIOR_PRECISION)
    return (largest_difference(project_mean, expected_mean),
            largest_difference(project_precision, expected_precision))


@pytest.mark.parametrize("network", NETWORKS)
def test_reference_layout_maps_outputs_and_jacobians(network):
    """The permutation from the project's layout to the reference's carries the network's
    outputs and Jacobian columns over, and the reference's Jacobian matches central finite
    differences."""
    shape, reference_mlp = NETWORKS[network]
    generator = seeded(7)
    x = torch.randn(5, shape.widths[0], generator=generator, dtype=torch.float64)
    theta = torch.randn(shape.n_params, generator=generator, dtype=torch.float64)
    perm = reference_mlp.from_torch_linear_order()
    assert sorted(perm.tolist()) == list(range(shape.n_params))
    outputs = reference_mlp.forward(theta[perm], x)
    assert largest_difference(shape.forward_1d(theta, x), outputs) < TOLERANCE
    jacobian = reference_mlp.jacobian(theta[perm], x)
    assert largest_difference(shape.jacobian(theta, x)[:, perm], jacobian) < TOLERANCE
    h = 1e-6
    basis = torch.eye(shape.n_params, dtype=torch.float64)
    differences = torch.stack([
        (reference_mlp.forward(theta[perm] + h * e, x)
         - reference_mlp.forward(theta[perm] - h * e, x)) / (2 * h) for e in basis], dim=1)
    assert largest_difference(differences, jacobian) < 1e-8


@pytest.mark.parametrize("algorithm", list(REFERENCE_RULES))
@pytest.mark.parametrize(("network", "likelihood", "state"), CASES)
def test_project_step_equals_the_thesis_step(algorithm, network, likelihood, state):
    """The mean and precision after one project step equal the reference's (eq. 4.1-4.12,
    Table 4.2) to :data:`TOLERANCE`, with the same state and draw."""
    mean_difference, precision_difference = both_steps(algorithm, network, likelihood, state)
    assert mean_difference < TOLERANCE
    assert precision_difference < TOLERANCE


@pytest.mark.parametrize(("algorithm", "mutant"),
                         [(a, m) for a, mutants in MUTANTS.items() for m in mutants])
@pytest.mark.parametrize(("network", "likelihood", "state"), CASES)
@pytest.mark.second_tier
def test_project_step_differs_from_each_mutant(algorithm, mutant, network, likelihood, state):
    """The mean or precision after one step differs from the mutant's by far more than the
    tolerance, so the equality test can tell the right point from the wrong one."""
    mean_difference, precision_difference = both_steps(algorithm, network, likelihood, state,
                                                       MUTANTS[algorithm][mutant])
    assert max(mean_difference, precision_difference) > MUTANT_SEPARATION


@pytest.mark.parametrize("algorithm", list(REFERENCE_RULES))
@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("likelihood", LIKELIHOODS)
def test_first_iteration_of_the_run_equals_the_thesis_step(algorithm, network, likelihood):
    """``run_natural_gradient_vi`` with one iteration from ``N(mu_0, v I)`` (a far mean, its
    draws from the generator it is given) equals the reference step from that state: the
    loop forms the same pseudo-data and update as the step the other tests check."""
    shape, reference_mlp = NETWORKS[network]
    generator = seeded(case_seed(network, likelihood, "random") + 500)
    x, y = data(network, likelihood, generator)
    mean = MEAN_SCALES["far"] * torch.randn(shape.n_params, generator=generator,
                                            dtype=torch.float64)
    variance, draw_seed = 0.4, 77
    state, trace = run_natural_gradient_vi(
        algorithm, shape, x, y, LIKELIHOODS[likelihood][0], PRIOR_PRECISION, mean,
        schedule=NaturalGradientSchedule(STEP_SIZE, 1, variance, MC_SAMPLES),
        generator=seeded(draw_seed))
    assert len(trace.train_nll) == 1
    precision = torch.eye(shape.n_params, dtype=torch.float64) / variance
    if algorithm == "oggn":
        draws = mean.unsqueeze(0)
    else:
        draws = draws_as_the_project_makes_them(mean, precision, draw_seed, MC_SAMPLES)
    perm = reference_mlp.from_torch_linear_order()
    expected_mean, expected_precision = reference_step(
        REFERENCE_RULES[algorithm], reference_mlp, LIKELIHOODS[likelihood][1], x, y, mean[perm],
        precision, draws[:, perm], STEP_SIZE, PRIOR_PRECISION)
    actual_mean, actual_precision = in_reference_layout(network, state.mean, state.precision)
    assert largest_difference(actual_mean, expected_mean) < TOLERANCE
    assert largest_difference(actual_precision, expected_precision) < TOLERANCE
