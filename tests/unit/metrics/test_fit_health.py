"""Fit health (bench.metrics.fit_health): the constant prediction's NLL in closed form, each
check on a fit that learnt something and on one that did not, and the verdict cause."""

from __future__ import annotations

import math

import pytest

from bench.metrics.fit_health import (
    MIN_GAIN_PER_POINT,
    assess,
    chance_check,
    constant_prediction_check,
    constant_prediction_nll,
    finite_check,
    fit_failed_reason,
    stopping_check,
)


def test_constant_prediction_nll_closed_forms():
    # Gaussian: y = (0, 2), sigma^2 = 1: residuals +-1 about the mean 1.
    assert constant_prediction_nll([0.0, 2.0], "gaussian", 1.0) == pytest.approx(
        1.0 + math.log(2 * math.pi))
    # Two classes in equal shares: n ln 2; three classes 1:1:2: -(2 ln 1/4 + 2 ln 1/2).
    assert constant_prediction_nll([0, 0, 1, 1], "bernoulli") == pytest.approx(4 * math.log(2))
    assert constant_prediction_nll([0, 1, 2, 2], "categorical") == pytest.approx(
        -(2 * math.log(0.25) + 2 * math.log(0.5)))
    with pytest.raises(ValueError, match="likelihood='poisson'"):
        constant_prediction_nll([1.0], "poisson")


def test_a_collapsed_fit_fails_and_a_fit_that_learnt_passes():
    # Figure 5.4's collapsed GLM: train NLL 395.2 against the constant prediction's 395.25.
    collapsed = constant_prediction_check(395.2, 395.25, 150)
    assert not collapsed.passed and "395.2" in collapsed.detail
    fitted = constant_prediction_check(21.4, 395.25, 150)
    assert fitted.passed
    edge = 395.25 - MIN_GAIN_PER_POINT * 150
    assert constant_prediction_check(edge, 395.25, 150).passed
    assert not constant_prediction_check(edge + 1e-6, 395.25, 150).passed


def test_accuracy_at_chance_fails_above_chance_passes():
    # Two classes, 100 test points: chance 0.5 with 2 standard errors 0.1.
    assert not chance_check(0.263, 0.5, 100).passed
    assert not chance_check(0.6, 0.5, 100).passed
    assert chance_check(0.61, 0.5, 100).passed


def test_assess_names_every_failed_check_and_the_reason_quotes_it():
    health = assess([finite_check({"a": 1.0, "b": math.nan}),
                     stopping_check(False, "ended by max_iterations after 600 iterations"),
                     chance_check(0.9, 0.5, 100)])
    assert health["healthy"] is False
    assert health["why"] == "non-finite b; ended by max_iterations after 600 iterations"
    assert health["checks"]["beats chance (accuracy)"]["passed"] is True
    records = [{"seed": 0, "health": {"OGGN": health}},
               {"seed": 0, "health": {"L-GGN": assess([finite_check({"a": 1.0})])}},
               {"seed": 1}]
    assert fit_failed_reason(records, ("L-GGN",)) == ""
    assert fit_failed_reason(records, ("OGGN",)).startswith("fit failed (OGGN, seed 0: non-finite")
    assert fit_failed_reason(records).startswith("fit failed (OGGN")
    assert fit_failed_reason([{"seed": 0}]) == ""


def test_a_classifier_that_did_not_train_fails_and_one_that_did_passes():
    """SGD that 'does not train' leaves the loss at ln 10: a uniform predictive."""
    import torch

    from bench.metrics.fit_health import classifier_checks
    from bench.predictive.categorical import Categorical

    labels = torch.arange(100) % 10
    uniform = assess(classifier_checks(Categorical(torch.full((100, 10), 0.1)), labels))
    assert uniform["healthy"] is False
    assert uniform["why"] == "test accuracy 0.1 vs chance 0.1 (needs > 0.16)"
    confident = torch.full((100, 10), 0.01)
    confident[torch.arange(100), labels] = 0.91
    assert assess(classifier_checks(Categorical(confident), labels))["healthy"] is True


def test_a_regression_mean_must_explain_some_variance_whatever_its_uncertainty():
    """y = (0, 2): a constant mean at 1 explains nothing; a mean of (0.2, 1.8) explains
    1 - 0.08 / 2 = 0.96 even with an NLL worse than a constant's (its uncertainty is what the
    table judges)."""
    import torch

    from bench.metrics.fit_health import regression_checks

    y = torch.tensor([0.0, 2.0])
    flat = assess(regression_checks(1.4, torch.tensor([1.0, 1.0]), y))
    assert flat["healthy"] is False
    assert flat["why"].startswith("test R^2 of the mean 0 (a constant prediction has 0")
    assert assess(regression_checks(9.0, torch.tensor([0.2, 1.8]), y))["healthy"] is True
    assert assess(regression_checks(math.inf, torch.tensor([0.2, 1.8]), y))["why"] == (
        "non-finite test NLL")
