"""Derived seeds: one SeedSequence helper for replications, ensemble members and samplers."""

from __future__ import annotations

import numpy as np
import torch

from bench.harness.rng import (
    derived_seed,
    global_rng_state,
    seeded_global_rng,
    set_global_rng_state,
)


def test_derived_seed_is_numpys_seed_sequence():
    children = np.random.SeedSequence(42).spawn(3)
    assert [derived_seed(42, spawn_key=(m,), bits=64) for m in range(3)] == [
        int(child.generate_state(1, dtype=np.uint64)[0]) for child in children]
    assert derived_seed([42, 1]) == int(np.random.SeedSequence([42, 1]).generate_state(1)[0])
    assert derived_seed(np.int64(42), spawn_key=(0,), bits=64) == 16138347438539916964
    assert derived_seed((42, 0)) == 3444837047


def test_distinct_inputs_give_distinct_seeds_within_range():
    seeds = {derived_seed([7, r]) for r in range(50)} | {derived_seed([8, r]) for r in range(50)}
    assert len(seeds) == 100 and all(0 <= s < 2**32 for s in seeds)
    assert derived_seed(7, spawn_key=(1,)) != derived_seed([7, 1])



def test_seeded_global_rng_draws_from_its_seed_and_restores_the_callers_state():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    with seeded_global_rng(7):
        inside = torch.rand(3)
        saved = global_rng_state()
        next_draws = torch.rand(2)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(inside, torch.rand(3, generator=torch.Generator().manual_seed(7)))
    set_global_rng_state(saved)
    assert torch.equal(torch.rand(2), next_draws)
    torch.set_rng_state(before)
