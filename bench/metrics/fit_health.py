"""Fit health: whether a fit learnt anything, so that no verdict rests on a failed fit.

A task records, per table row, the checks its fit has (``TaskResult.health``), each one of:

- **finite**: every value the fit produced is finite;
- **beats the constant prediction**: its training NLL is at least
  :data:`MIN_GAIN_PER_POINT` nats per training point below the best constant prediction's
  (the mean of y with the model's noise for a Gaussian, the class shares for a categorical);
  where only a predictive on test points is at hand (the regression and classification
  runners), its mean explains at least :data:`MIN_EXPLAINED_VARIANCE` of the variance, or its
  accuracy beats chance: the predictive's calibration is what the tables judge;
- **beats chance**: its accuracy exceeds chance by more than :data:`CHANCE_SE` binomial
  standard errors of chance at its number of test points;
- **stopped by its rule**: a fit that has a stopping rule ended because the rule said so,
  not at its iteration cap.

The record holds ``health = {row: {"healthy", "why", "checks"}}``; the verdict layer
(:mod:`bench.reporting.compare`) reports any cell or claim that uses an unhealthy fit as
"not comparable: fit failed (<why>)".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.metrics.classification_scores import accuracy, nll

# A fit must explain at least this much (nats per training point) beyond a constant prediction.
MIN_GAIN_PER_POINT = 0.01
# An accuracy counts as above chance beyond this many binomial standard errors of chance.
CHANCE_SE = 2.0
# A regression fit's mean must explain at least this share of the variance (R^2).
MIN_EXPLAINED_VARIANCE = 0.01


@dataclass(frozen=True)
class Check:
    """One health check: its name, whether it passed and what was measured."""

    name: str
    passed: bool
    detail: str


def finite_check(values: dict[str, float]) -> Check:
    """All ``values`` finite; the detail names the first that is not."""
    bad = [name for name, value in values.items() if not math.isfinite(float(value))]
    detail = f"non-finite {', '.join(bad[:3])}" if bad else f"{len(values)} values finite"
    return Check("finite", not bad, detail)


def constant_prediction_nll(y: Sequence[float], likelihood: str,
                            noise_variance: float = 1.0) -> float:
    """Training NLL (nats, summed) of the best constant prediction: a Gaussian with the mean
    of ``y`` and the model's ``noise_variance``, or the class shares of ``y`` for
    ``bernoulli`` / ``categorical`` (integer labels)."""
    n = len(y)
    if n == 0:
        raise ValueError("no training targets")
    if likelihood in ("bernoulli", "categorical"):
        counts: dict[float, int] = {}
        for label in y:
            counts[float(label)] = counts.get(float(label), 0) + 1
        return -sum(c * math.log(c / n) for c in counts.values())
    if likelihood != "gaussian":
        raise ValueError(f"likelihood={likelihood!r}; choose gaussian, bernoulli or categorical")
    mean = sum(y) / n
    return (sum((v - mean) ** 2 for v in y) / (2 * noise_variance)
            + n / 2 * math.log(2 * math.pi * noise_variance))


def constant_prediction_check(train_nll: float, constant_nll: float, n: int) -> Check:
    """The fit's summed training NLL at least ``MIN_GAIN_PER_POINT * n`` below the constant
    prediction's."""
    gain = (constant_nll - train_nll) / n
    detail = (f"train NLL {train_nll:.4g} vs a constant prediction's {constant_nll:.4g} "
              f"({gain:+.3g} nats per point, needs >= {MIN_GAIN_PER_POINT:g})")
    return Check("beats the constant prediction", gain >= MIN_GAIN_PER_POINT, detail)


def chance_check(accuracy: float, chance: float, n: int, what: str = "accuracy") -> Check:
    """``accuracy`` above ``chance`` by more than ``CHANCE_SE`` binomial standard errors of
    chance at ``n`` points."""
    margin = CHANCE_SE * math.sqrt(chance * (1 - chance) / n)
    detail = f"{what} {accuracy:.3g} vs chance {chance:.3g} (needs > {chance + margin:.3g})"
    return Check(f"beats chance ({what})", accuracy > chance + margin, detail)


def stopping_check(stopped_by_rule: bool, how: str) -> Check:
    """Whether a fit with a stopping rule ended by the rule (``how``: what ended it)."""
    return Check("stopped by its rule", stopped_by_rule, how)


def grid_checks(arrays: dict[str, Any], polish_cap: int | None) -> list[Check]:
    """The checks of a grid of MAP fits (one network per prior precision, arrays
    ``prior_precision``, ``log_evidence`` and, after an L-BFGS polish, ``polish_iterations``
    and ``gradient_norm``): the evidence finite, and every polish ended by its rule (gradient
    tolerance or no further decrease) before its cap of ``polish_cap`` iterations."""
    deltas = arrays["prior_precision"]
    checks = [finite_check({f"delta={d:.3g}/log_evidence": v
                            for d, v in zip(deltas, arrays["log_evidence"], strict=True)})]
    iterations = arrays.get("polish_iterations")
    if polish_cap and iterations is not None:
        capped = [(d, g) for d, n, g in zip(deltas, iterations, arrays["gradient_norm"],
                                            strict=True) if n >= polish_cap]
        detail = (f"polish at delta {', '.join(f'{d:.3g}' for d, _ in capped)} ended at its "
                  f"cap of {polish_cap} iterations (|grad L| "
                  f"{', '.join(f'{g:.2g}' for _, g in capped)})" if capped else
                  f"every polish ended by its rule within {polish_cap} iterations")
        checks.append(stopping_check(not capped, detail))
    return checks


def assess(checks: Iterable[Check]) -> dict[str, Any]:
    """The record's health entry of one row: ``healthy`` (every check passed), ``why`` (the
    failed checks' details, "" when healthy) and every check's result."""
    checks = list(checks)
    failed = [check.detail for check in checks if not check.passed]
    return {"healthy": not failed, "why": "; ".join(failed),
            "checks": {check.name: {"passed": check.passed, "detail": check.detail}
                       for check in checks}}


def unhealthy_fits(records: Iterable[dict[str, Any]], rows: Iterable[str] = ()) -> list[str]:
    """``"<row>, seed <s>: <why>"`` for every unhealthy fit of ``rows`` (all rows when empty)
    in the records' ``health``; records written before health existed have none."""
    wanted = set(rows)
    found = []
    for record in records:
        for row, entry in (record.get("health") or {}).items():
            if (not wanted or row in wanted) and not entry.get("healthy", True):
                found.append(f"{row}, seed {record.get('seed')}: {entry.get('why', '')}")
    return found


def fit_failed_reason(records: Iterable[dict[str, Any]], rows: Iterable[str] = ()) -> str:
    """The verdict cause of a cell or claim using ``rows`` of ``records``: "fit failed
    (...)" naming the first unhealthy fits, or "" when every fit is healthy."""
    failed = unhealthy_fits(records, rows)
    if not failed:
        return ""
    more = f"; and {len(failed) - 2} more" if len(failed) > 2 else ""
    return f"fit failed ({'; '.join(failed[:2])}{more})"


def health_missing_reason(records: Iterable[dict[str, Any]], rows: Iterable[str] = ()) -> str:
    """For a task that records its fits' health: "fit health not recorded (...)" when a record
    holding ``rows`` (any row when empty) carries no health at all (written before the task
    recorded it), so that its fits cannot vouch for a verdict; "" otherwise."""
    wanted = set(rows)
    missing = [record for record in records if not record.get("health")
               and (not wanted or any(cell["row"] in wanted
                                      for cell in record.get("cells") or ()))]
    if not missing:
        return ""
    seeds = sorted({str(record.get("seed")) for record in missing})
    return (f"fit health not recorded ({len(missing)} record(s), seed(s) {', '.join(seeds)}, "
            "written before their task recorded it: rerun them)")


def classifier_checks(predictive: Any, labels: Any, what: str = "test") -> list[Check]:
    """The checks of a classifier's fit from its predictive (a
    :class:`~bench.predictive.Categorical`) on labelled points: its NLL finite and its accuracy
    above chance (one over the classes). Its calibration is what a table judges, not a sign of
    a failed fit, so the NLL is not held against a constant prediction here."""
    n = len(labels)
    checks = [finite_check({f"{what} NLL": nll(predictive, labels)})]
    checks.append(chance_check(accuracy(predictive, labels), 1.0 / predictive.n_classes, n,
                               f"{what} accuracy"))
    return checks


def explained_variance_check(mean: Any, y: Any, what: str = "test") -> Check:
    """A regression fit's mean against the constant prediction (the mean of ``y``): it must
    explain at least ``MIN_EXPLAINED_VARIANCE`` of the variance of ``y`` (R^2)."""
    predicted = [float(v) for v in mean.reshape(-1).tolist()]
    values = [float(v) for v in y.reshape(-1).tolist()]
    centre = sum(values) / len(values)
    total = sum((v - centre) ** 2 for v in values)
    residual = sum((v - p) ** 2 for v, p in zip(values, predicted, strict=True))
    r2 = 1.0 - residual / total if total > 0 else math.nan
    detail = (f"{what} R^2 of the mean {r2:.3g} (a constant prediction has 0; needs >= "
              f"{MIN_EXPLAINED_VARIANCE:g})")
    return Check("beats the constant prediction", r2 >= MIN_EXPLAINED_VARIANCE, detail)


def regression_checks(mean_nll: float, mean: Any, y_test: Any) -> list[Check]:
    """The checks of a regression fit from its predictive on the test points: its NLL finite
    and its mean explaining some of the test variance (:func:`explained_variance_check`). Its
    uncertainty is what a table judges, not a sign of a failed fit, so the NLL is not held
    against a constant prediction here."""
    return [finite_check({"test NLL": mean_nll}), explained_variance_check(mean, y_test)]
