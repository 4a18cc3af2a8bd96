"""The LGVA single-sample diagnosis (bench.benchmarks.lgva_single_sample): the split of a mean
step into OGGN's step and the draws' part is exact, and on a linear model (J fixed) the LGVA
mean jitters around the exact posterior mean as far as the module's yardstick says."""

from __future__ import annotations

import statistics

import pytest
import torch

from bench.benchmarks.lgva_single_sample import (
    DELTA,
    linear_jitter,
    main,
    norm_in,
    step_with_split,
)
from bench.harness.rng import make_generator
from bench.methods.variational.ggn_natural_gradient import (
    NaturalGradientState,
    natural_gradient_step,
)
from bench.methods.variational.ggn_pseudo_data import pseudo_data_rule
from bench.models.glm_likelihoods import GaussianLikelihood
from bench.models.mlp import MLPShape, init_parameters


def problem(hidden: tuple[int, ...]) -> dict:
    generator = make_generator(3)
    x = torch.randn(40, 2, generator=generator, dtype=torch.float64)
    y = torch.sin(x.sum(1)) + 0.3 * torch.randn(40, generator=generator, dtype=torch.float64)
    network = MLPShape((2, *hidden, 1), "tanh")
    return {"network": network, "x": x, "y": y, "likelihood": GaussianLikelihood(0.1),
            "start": init_parameters(network, make_generator(0), torch.float64)}


def test_lgva_step_is_oggns_step_plus_the_draws_part_and_oggn_has_none():
    setup = problem((6,))
    state = NaturalGradientState.isotropic(setup["start"], 0.1)
    f_mean, jacobians = pseudo_data_rule("oggn")(setup["network"], state, setup["x"], 1,
                                                 make_generator(0))
    oggn = natural_gradient_step(state, f_mean, jacobians, setup["y"], setup["likelihood"],
                                 DELTA, 0.1)
    lgva, noise, offset = step_with_split(setup, state, "lgva", 0.1, 1, make_generator(1))
    assert torch.allclose(lgva.mean - noise, oggn.mean, rtol=0, atol=1e-10)
    assert torch.equal(lgva.precision, oggn.precision)
    assert norm_in(state, offset) > 0
    same, no_noise, _ = step_with_split(setup, state, "oggn", 0.1, 1, make_generator(1))
    assert torch.equal(same.mean, oggn.mean) and float(no_noise.abs().max()) == 0.0


@pytest.mark.second_tier
def test_on_a_linear_model_the_lgva_mean_jitters_as_far_as_the_yardstick():
    # No hidden layer: f = w^T x + b, J does not move, the exact posterior is OGGN's fixed
    # point (one OGGN step of size 1 from anywhere).
    setup = problem(())
    start = NaturalGradientState.isotropic(setup["start"], 0.1)
    f_mean, jacobians = pseudo_data_rule("oggn")(setup["network"], start, setup["x"], 1,
                                                 make_generator(0))
    exact = natural_gradient_step(start, f_mean, jacobians, setup["y"], setup["likelihood"],
                                  DELTA, 1.0)
    step_size, generator, state, squared = 0.1, make_generator(7), exact, []
    # 4000 updates: the squared distance is an AR process with lag-one correlation
    # (1 - step)^2, about 400 independent values, a standard error near 4 % of the mean.
    for _ in range(4000):
        state, _, _ = step_with_split(setup, state, "lgva", step_size, 1, generator)
        squared.append(norm_in(exact, state.mean - exact.mean) ** 2)
    measured = statistics.fmean(squared[200:])
    assert measured == pytest.approx(linear_jitter(exact, step_size, 1) ** 2, rel=0.15)


def test_quick_report_lists_every_run(tmp_path):
    out = tmp_path / "lgva.md"
    main(["--quick", "--out", str(out)])
    text = out.read_text()
    for label in ("LGVA, S = 1, step 0.1", "LGVA, S = 1, step 0.01", "LGVA, S = 10, step 0.1",
                  "OGGN, step 0.1 (control)"):
        assert f"| {label}" in text
