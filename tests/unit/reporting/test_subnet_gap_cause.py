"""Causes that quote each seed's own records: Subnet Figure 1's mis- minus well-specified gap
(the gap per seed with its 95% interval, and whether zero lies inside), and a spec's cause
function for an anchor, which must receive the records."""

from __future__ import annotations

import pytest

from bench.reporting.figures.subnet_plots import DOMAINS
from bench.reporting.specs.subnet import DIAGONAL, GRADIENT, GREEDY, LAST_K, gap_by_seed


def seed_records(seed: int, proposed_w2: dict[str, float]) -> list[dict]:
    """One record per specification: baseline W2 1.0 (Subnet diagonal, Last k) at k = 1, the
    proposed methods at ``proposed_w2[specification]`` in every domain."""
    records = []
    for specification, w2 in proposed_w2.items():
        cells = [{"row": method, "column": f"{specification}/{domain}/w2@k=1",
                  "value": w2 if method in (GREEDY, GRADIENT) else 1.0}
                 for method in (GREEDY, GRADIENT, DIAGONAL, LAST_K) for domain in DOMAINS]
        records.append({"seed": seed, "status": "ok", "cells": cells})
    return records


def test_the_cause_gives_each_seed_s_gap_and_its_interval():
    # gaps (1 - w2_mis) - (1 - w2_well): seed 0 +0.1, seed 1 -0.1, seed 2 +0.3
    records = [*seed_records(0, {"misspecified": 0.5, "wellspecified": 0.6}),
               *seed_records(1, {"misspecified": 0.7, "wellspecified": 0.6}),
               *seed_records(2, {"misspecified": 0.3, "wellspecified": 0.6})]
    cause = gap_by_seed(records)
    assert "the gap on each of 3 seeds ranges -0.1000 to +0.3000, mean +0.1000" in cause
    assert "95% CI [-0.3968, +0.5968]" in cause
    assert cause.endswith("zero lies inside, so the sign the claim needs is not resolved at "
                          "this scale")


def test_one_seed_gives_no_interval():
    with pytest.raises(LookupError):
        gap_by_seed(seed_records(0, {"misspecified": 0.5, "wellspecified": 0.6}))


def test_a_spec_cause_function_for_an_anchor_reads_the_records():
    """A report spec's cause for an anchor label may be a function of the ok records, as a
    cell's may; the anchor table used to call it with none, so the cause came out empty and
    the report refused to render (Subnet Figure 2's seed-spread causes)."""
    from bench.reporting.claims import ClaimRule
    from bench.reporting.compare import anchor_cause
    from bench.reporting.spec import Anchor, ArtifactSpec

    anchor = Anchor("share", "always", lambda records: 0.5, ClaimRule())
    spec = ArtifactSpec(paper="subnet", artifact="figure-99", title="t", anchors=(anchor,),
                        causes={("share", "*"): lambda records: f"{len(records)} records"})
    assert anchor_cause(spec, anchor, [{"seed": 0}, {"seed": 1}]) == "2 records"
