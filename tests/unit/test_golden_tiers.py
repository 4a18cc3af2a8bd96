"""The fast tier keeps one smoke golden job per experiment, its cheapest by measured seconds
(tests/golden/costs.py); the rest of each sweep is second tier."""

from __future__ import annotations

from tests.golden.costs import fast_tier_ids, golden_job_id, load_costs, parse_durations
from tests.integration.test_golden_cells import golden_jobs, tiered_smoke_jobs

GOLDEN = "tests/integration/test_golden_cells.py::test_smoke_job_reproduces_its_golden_cells"
LISTING = "\n".join([
    "============================= slowest durations ==============================",
    f"2.50s call     {GOLDEN}[a/x-experiment=a/x m=1 scale=smoke seed=0-]",
    f"0.40s setup    {GOLDEN}[a/x-experiment=a/x m=1 scale=smoke seed=0-]",
    f"1.00s call     {GOLDEN}[a/x-experiment=a/x m=2 scale=smoke seed=0-]",
    "9.00s call     tests/unit/test_other.py::test_something"])


def test_durations_sum_the_phases_of_each_smoke_golden_job_and_skip_other_tests():
    seconds = parse_durations(LISTING)
    assert seconds == {"a/x-experiment=a/x m=1 scale=smoke seed=0-": 2.9,
                       "a/x-experiment=a/x m=2 scale=smoke seed=0-": 1.0}


def test_the_cheapest_measured_job_of_each_experiment_and_every_unmeasured_job_are_fast():
    jobs = [("a/x", "m=1"), ("a/x", "m=2"), ("b/y", "k=1"), ("b/y", "k=2"), ("c/z", "new")]
    costs = {golden_job_id("a/x", "m=1"): 2.9, golden_job_id("a/x", "m=2"): 1.0,
             golden_job_id("b/y", "k=1"): 0.3, golden_job_id("b/y", "k=2"): 0.7}
    assert fast_tier_ids(jobs, costs) == {golden_job_id("a/x", "m=2"),
                                          golden_job_id("b/y", "k=1"),
                                          golden_job_id("c/z", "new")}


def test_every_experiment_with_smoke_goldens_keeps_one_in_the_fast_tier():
    experiments = {experiment for experiment, _, _ in golden_jobs("smoke")}
    fast = [param.values[0] for param in tiered_smoke_jobs() if not param.marks]
    assert sorted(set(fast)) == sorted(experiments)
    assert len(fast) == len(experiments)


def test_the_stored_costs_name_only_existing_smoke_golden_jobs():
    ids = {golden_job_id(experiment, key) for experiment, key, _ in golden_jobs("smoke")}
    assert set(load_costs()) <= ids
