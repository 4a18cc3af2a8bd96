"""Explicit random generators, derived seeds and dtypes, made from config values, passed down."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bench.harness.errors import require_choice

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def make_generator(seed: int, device: str = "cpu") -> torch.Generator:
    """A torch generator seeded with ``seed`` (never the global RNG)."""
    return torch.Generator(device=device).manual_seed(int(seed))


def derived_seed(entropy: int | Sequence[int], *, spawn_key: Sequence[int] = (),
                 bits: int = 32) -> int:
    """A ``bits``-bit (32 or 64) seed from numpy's ``SeedSequence(entropy, spawn_key=spawn_key)``.

    Distinct ``entropy`` (e.g. ``[job_seed, r]``) or spawn keys give independent streams;
    ``spawn_key=(i,)`` is the i-th child of ``SeedSequence(entropy).spawn(...)``.
    """
    entropy = [int(e) for e in entropy] if isinstance(entropy, Sequence) else int(entropy)
    sequence = np.random.SeedSequence(entropy, spawn_key=tuple(spawn_key))
    return int(sequence.generate_state(1, dtype={32: np.uint32, 64: np.uint64}[bits])[0])


def resolve_dtype(name: str, key: str = "protocol.dtype") -> torch.dtype:
    """torch dtype for a config string, with a one-line error naming ``key``."""
    return DTYPES[require_choice(key, name, DTYPES)]
