"""Confidence intervals that respect a value's range: coverages, accuracies and other proportions.

The report's 95% CI is the Student-t interval over seeds (:func:`bench.reporting.aggregate.
mean_and_ci`). For a proportion it can leave the range ("95.33 [89.15, 101.51]"), so it is cut
at the range: ``[max(low, a), min(high, b)]`` for a cell in ``[a, b]``. The cut interval has the
coverage of the t-interval (the true mean lies in ``[a, b]``, so it is in the cut interval exactly
when it is in the uncut one), and a paper value inside the range is inside the cut interval
exactly when it is inside the uncut one, so verdicts that use the CI do not change. A Wilson
interval on the pooled count would need the number of points behind each seed's value, which
the records do not hold, and it would leave out the seed-to-seed variation the t-interval keeps.

Which cells are proportions: an ``ArtifactSpec.value_ranges`` pattern when one matches, else a
cell whose measure (the last ``/`` part of its column, without an ``@...`` suffix) is named like
a proportion (``cov95``, ``accuracy``, ``conf_fmnist``, ``auroc_kmnist``, ``ece``, ``frac_*``);
its range is ``[0, 100]`` with the unit ``%`` and ``[0, 1]`` with ``fraction`` (the cell's
paper unit, else its column's in the targets file), else ``[0, 1]`` when every proportion-named
value of the table lies in ``[0, 1]`` and ``[0, 100]`` when they lie in ``[0, 100]``. A unit
alone never makes a cell a proportion (``prediction_runtime_overhead`` is printed in %).

Figures cut their bands the same way (:func:`measure_range`, :func:`clip_band`): a
proportion's band at its range, told from the drawn means, and the band of another bounded
measure (Brier score, categorical entropy, W2, MSE, calibration error) at that measure's
range, so that no band shows values the measure cannot take.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from bench.reporting.spec import ArtifactSpec, matching_pattern

Range = tuple[float, float]
PERCENT: Range = (0.0, 100.0)
FRACTION: Range = (0.0, 1.0)
NONNEGATIVE: Range = (0.0, math.inf)
# The average log probability of discrete labels (a Bernoulli or categorical log likelihood).
LOG_PROBABILITY: Range = (-math.inf, 0.0)
UNIT_RANGES: dict[str, Range] = {"%": PERCENT, "fraction": FRACTION}
# Ranges of bounded measures that are not proportions, by measure name: the Brier score summed
# over classes, the entropy of a categorical predictive, distances and squared errors.
MEASURE_RANGES: dict[str, Range] = {"brier": (0.0, 2.0), "entropy": NONNEGATIVE,
                                    "w2": NONNEGATIVE, "mse": NONNEGATIVE,
                                    "calibration": NONNEGATIVE}
PROPORTION_MEASURE = re.compile(
    r"(cov\d+|coverage|(test_|train_)?acc(uracy)?|conf(idence)?|(ood_)?auroc|[em]ce|frac)"
    r"(_\w+)?"
)
CI_RULE = ("95% CI: Student-t over seeds, cut at the range for proportions (same coverage, "
           "same verdicts)")


def measure_name(column: str) -> str:
    """The measure a column holds: ``"misspecified/ood/w2@k=1"`` -> ``"w2"``."""
    return str(column).split("/")[-1].split("@")[0]


def is_proportion(column: str) -> bool:
    """Whether the column's measure is named like a proportion (coverage, accuracy, ...)."""
    return PROPORTION_MEASURE.fullmatch(measure_name(column)) is not None


def inferred_range(values: Iterable[float]) -> Range | None:
    """``[0, 1]`` when every finite value lies in it, else ``[0, 100]`` when they all lie in
    that, else None (no range can be told)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    for bounds in (FRACTION, PERCENT):
        if all(bounds[0] <= v <= bounds[1] for v in finite):
            return bounds
    return None


def cell_ranges(spec: ArtifactSpec, cells: Mapping[tuple[str, str, str], Iterable[float]],
                units: Mapping[tuple[str, str], str]) -> dict[tuple[str, str, str], Range | None]:
    """The range of every ``(protocol, row, column)`` of ``cells`` (None: unbounded).

    ``cells`` maps each cell to its values (e.g. the mean and the paper seed's value); ``units``
    maps ``(row, column)`` to the paper's unit, and ``("*", column)`` to a unit of the column.
    """
    inferred = inferred_range(v for key, values in cells.items() if is_proportion(key[2])
                              for v in values)
    ranges: dict[tuple[str, str, str], Range | None] = {}
    for protocol, row, column in cells:
        pattern = matching_pattern(spec.value_ranges, protocol, row, column)
        if pattern is not None:
            ranges[(protocol, row, column)] = spec.value_ranges[pattern]
        elif is_proportion(column):
            unit = units.get((row, column)) or units.get(("*", column), "")
            ranges[(protocol, row, column)] = UNIT_RANGES.get(unit, inferred)
        else:
            ranges[(protocol, row, column)] = None
    return ranges


def clip_interval(low: float, high: float, bounds: Range | None) -> tuple[float, float]:
    """``[low, high]`` cut at ``bounds`` (NaN bounds stay NaN; None leaves it as it is)."""
    if bounds is None:
        return low, high
    if math.isfinite(low):
        low = min(max(low, bounds[0]), bounds[1])
    if math.isfinite(high):
        high = max(min(high, bounds[1]), bounds[0])
    return low, high


def range_text(bounds: Range | None) -> str:
    """``"[0, 100]"`` for a range, ``""`` for none."""
    return "" if bounds is None else f"[{bounds[0]:g}, {bounds[1]:g}]"


def measure_range(column: str, means: Iterable[float]) -> Range | None:
    """The range a figure's band of ``column``'s measure is cut at: a proportion's
    (:func:`inferred_range` of the drawn ``means``, ``[0, 1]`` or ``[0, 100]``), else the
    measure's entry in :data:`MEASURE_RANGES`, else None (unbounded)."""
    if is_proportion(column):
        return inferred_range(means)
    return MEASURE_RANGES.get(measure_name(column))


def clip_band(lows: Iterable[float], highs: Iterable[float], bounds: Range | None
              ) -> tuple[list[float], list[float]]:
    """The lower and upper ends of a band, each pair cut at ``bounds`` (:func:`clip_interval`)."""
    pairs = [clip_interval(low, high, bounds) for low, high in zip(lows, highs, strict=True)]
    return [low for low, _ in pairs], [high for _, high in pairs]
