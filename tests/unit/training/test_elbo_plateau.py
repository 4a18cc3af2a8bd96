"""The ELBO stopping rule (:mod:`bench.training.elbo_plateau`): its bookkeeping on synthetic
estimates, and VOGGN stopped by it on Bayesian logistic regression, where the Gaussian-VI
optimum is known by quadrature (the known-answer test's ``gaussian_vi_optimum``)."""

from __future__ import annotations

import pytest
import torch

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.variational.ggn_natural_gradient import (
    NaturalGradientGGN,
    NaturalGradientSchedule,
    run_natural_gradient_vi,
)
from bench.models.glm_likelihoods import BernoulliLikelihood
from bench.training.elbo_plateau import ElboPlateauMonitor, ElboPlateauRule
from tests.unit.methods.test_ggn_known_answers import (
    LINEAR,
    LOGISTIC_DELTA,
    LOWER,
    P,
    classification_data,
    gaussian_vi_optimum,
    negative_elbo,
)

NOISE = torch.randn(400, generator=make_generator(0), dtype=torch.float64)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def estimates(levels: list[float], shift_sd: float = 0.01) -> list[torch.Tensor]:
    """Per-draw values with common draws: each estimate is ``NOISE`` plus a level and a small
    independent part, as common random numbers give."""
    generator = make_generator(1)
    return [NOISE + level + shift_sd * torch.randn(400, generator=generator,
                                                   dtype=torch.float64) for level in levels]


def test_a_flat_elbo_plateaus_after_patience_estimates_and_a_rising_one_never():
    rule = ElboPlateauRule(every=10, samples=400, patience=3, ses=2.0)
    flat = ElboPlateauMonitor(rule)
    for k, values in enumerate(estimates([0.0] * 4)):
        assert not flat.plateaued()
        flat.update(10 * k + 9, values, kl=1.0)
    assert flat.plateaued() and flat.iterations == [10, 20, 30, 40]
    rising = ElboPlateauMonitor(rule)
    # each step 0.01 nats: far below either estimate's own standard error (about 0.05) but
    # about 14 paired standard errors
    for k, values in enumerate(estimates([0.01 * k for k in range(10)])):
        rising.update(10 * k + 9, values, kl=1.0)
        assert not rising.plateaued()
    assert rising.standard_error[-1] > 4 * rising.improvement_standard_error[-1]


def test_only_an_improvement_beyond_the_paired_standard_errors_resets_the_count():
    rule = ElboPlateauRule(every=1, samples=400, patience=2, ses=2.0)
    monitor = ElboPlateauMonitor(rule)
    for values in estimates([0.0, 0.0001, 0.05]):
        monitor.update(0, values, kl=0.0)
    assert monitor.without_improvement == 0  # the third improved on the first by 0.05
    assert monitor.improvement[1] == pytest.approx(0.0001, abs=0.002)
    assert monitor.improvement[2] > rule.ses * monitor.improvement_standard_error[2]


@pytest.mark.parametrize(("changes", "key"), [
    ({"every": -1}, "stop_elbo_every"), ({"samples": 1}, "stop_elbo_samples"),
    ({"patience": 0}, "stop_elbo_patience"), ({"ses": -1.0}, "stop_elbo_ses")])
def test_bad_settings_are_one_line_errors_naming_the_method_key(changes, key):
    with pytest.raises(ConfigError, match=f"method.{key}="):
        ElboPlateauRule(**{"every": 5, **changes})
    with pytest.raises(ConfigError, match=f"method.{key}="):
        NaturalGradientGGN(likelihood="bernoulli", hidden=(2,),
                           **{f"stop_elbo_{k}": v for k, v in {"every": 5, **changes}.items()})


def quadrature_elbo(mean: torch.Tensor, precision: torch.Tensor) -> float:
    factor = torch.linalg.cholesky(torch.linalg.inv(precision))
    return -float(negative_elbo(torch.cat([mean, factor[LOWER[0], LOWER[1]]])))


def voggn(iterations: int, rule: ElboPlateauRule | None, seed: int = 0):
    x, y = classification_data()
    return run_natural_gradient_vi(
        "voggn", LINEAR, x, y, BernoulliLikelihood(), LOGISTIC_DELTA,
        torch.zeros(P, dtype=torch.float64),
        schedule=NaturalGradientSchedule(0.1, iterations, 1.0, 1),
        generator=make_generator(seed), elbo_rule=rule, elbo_seed=100 + seed)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.second_tier
def test_voggn_stopped_by_the_elbo_rule_is_at_the_gaussian_vi_optimum(seed):
    """Step 0.1, S = 1 (the corrected protocol's VOGGN), estimates of 500 draws every 20
    iterations, patience 5. The rule stops long before the cap; the q it leaves is below the
    quadrature optimum by less than 3 standard errors of its last estimate (measured on seeds
    0-2: 0.013-0.086 nats, standard errors 0.05-0.07). The stopped state is the state of the
    run without the rule at the same iteration: the estimates draw from their own generator."""
    rule = ElboPlateauRule(every=20, samples=500, patience=5, ses=2.0)
    state, trace = voggn(5000, rule, seed)
    assert trace.stop_reason == "elbo_plateau"
    assert len(trace.train_nll) < 1000
    mean, precision = gaussian_vi_optimum()
    gap = quadrature_elbo(mean, precision) - quadrature_elbo(state.mean, state.precision)
    assert 0 <= gap < 3 * trace.elbo_standard_error[-1]
    plain, _ = voggn(len(trace.train_nll), None, seed)
    assert torch.equal(plain.mean, state.mean) and torch.equal(plain.precision, state.precision)
    assert trace.elbo_iteration[-1] == len(trace.train_nll)
