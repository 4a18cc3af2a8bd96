"""Causes of the subnetwork paper's reports (:mod:`bench.reporting.specs.subnet`), computed
from the records.

Both causes quote a claim's statistic on each seed's own records, with its range, mean and
95% interval, so a reader sees whether the claim's side is resolved at this many seeds: Figure
1's mis- minus well-specified gap against zero, and Figure 2's shares of comparisons (over
settings, k and methods) against their agree thresholds.
"""

from __future__ import annotations

from bench.reporting.claims import Statistic, claim, seed_spread_cause
from bench.reporting.spec import Anchor


def gap_spread(gap: Statistic):
    """Cause of Figure 1's gap claim: :func:`seed_spread_cause` of the statistic ``gap`` (the
    mis- minus well-specified W2 gain) on each seed's records, against zero."""
    return seed_spread_cause(
        claim(gap), "the gap", 0.0,
        "zero lies inside, so the sign the claim needs is not resolved at this scale")


def share_spread(anchor: Anchor):
    """:func:`seed_spread_cause` of ``anchor``'s statistic against its agree threshold."""
    threshold = anchor.rule.agree
    return seed_spread_cause(
        anchor.ours, "the statistic", threshold,
        f"its agree threshold {threshold:g} lies inside, so whether the claim holds is not "
        "resolved at this many seeds")
