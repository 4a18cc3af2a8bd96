"""Paper claims judged once per protocol, each anchor's cause quoting the other protocol.

An artifact run under ``protocol=paper`` and ``protocol=corrected`` states each claim twice:
``<label> [protocol paper]`` judged on the paper-protocol records only and ``<label> [protocol
corrected]`` on the corrected ones. The cause of an anchor that does not agree is built from
the records: how its own protocol's fits ended (``describe_fits``) and the other protocol's
value and verdict with its fits, so a report says from its records whether the correction
changes the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.reporting.claims import Statistic, claim
from bench.reporting.spec import Anchor
from bench.reporting.verdicts import Estimate, VerdictRule

Records = list[dict[str, Any]]
PROTOCOLS = ("paper", "corrected")


@dataclass(frozen=True)
class Claim:
    """A paper claim: label, the paper's wording, its statistic of the mean cells (of the
    records themselves with ``of_records``: a float or an Estimate), its rule and the rows
    whose fits the statistic uses (every row when empty)."""

    label: str
    paper: str
    statistic: Statistic
    rule: VerdictRule
    rows: tuple[str, ...] = ()
    of_records: bool = False


def records_of(protocol: str, records: Records) -> Records:
    """The records of one protocol (LookupError when there are none)."""
    chosen = [r for r in records if r.get("protocol") == protocol]
    if not chosen:
        raise LookupError(f"no {protocol}-protocol records")
    return chosen


def protocol_label(label: str, protocol: str) -> str:
    """The anchor label of a claim under one protocol."""
    return f"{label} [protocol {protocol}]"


def claim_value(item: Claim, protocol: str) -> Callable[[Records], float | Estimate]:
    """Anchor getter: the claim's statistic of one protocol's records (of their mean cells
    unless the claim reads the records)."""
    statistic = item.statistic if item.of_records else claim(item.statistic)
    return lambda records: statistic(records_of(protocol, records))


def _verdict_text(item: Claim, protocol: str, records: Records) -> str:
    try:
        measured = claim_value(item, protocol)(records)
    except LookupError:
        return f"protocol {protocol}: no records"
    value = float(measured)
    if not math.isfinite(value):
        return f"protocol {protocol}: no finite value"
    ci = ((measured.low, measured.high) if isinstance(measured, Estimate)
          else (math.nan, math.nan))
    verdict = item.rule.classify(value, None, ci)
    return f"protocol {protocol}: {value:.3g} ({verdict})"


def cross_protocol_cause(item: Claim, protocol: str,
                         describe_fits: Callable[[Records], str]) -> Callable[[Records], str]:
    """Anchor cause: this protocol's fits, then every other protocol's value, verdict and
    fits, all read from the records."""

    def cause(records: Records) -> str:
        parts = [f"{protocol}-protocol fits — {describe_fits(records_of(protocol, records))}"]
        for other in PROTOCOLS:
            if other == protocol or not any(r.get("protocol") == other for r in records):
                continue
            verdict = _verdict_text(item, other, records)
            parts.append(f"{verdict[:1].upper()}{verdict[1:]}; its fits — "
                         f"{describe_fits(records_of(other, records))}")
        return ". ".join(parts)

    return cause


def protocol_anchors(claims: tuple[Claim, ...],
                     describe_fits: Callable[[Records], str]) -> tuple[Anchor, ...]:
    """Each claim as one anchor per protocol (paper first)."""
    return tuple(Anchor(protocol_label(item.label, protocol), item.paper,
                        claim_value(item, protocol), item.rule,
                        cause=cross_protocol_cause(item, protocol, describe_fits),
                        protocol=protocol, rows=item.rows)
                 for protocol in PROTOCOLS for item in claims)
