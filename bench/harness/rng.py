"""Explicit random generators and dtypes, created from config values and passed down."""

from __future__ import annotations

import torch

from bench.harness.errors import require_choice

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def make_generator(seed: int, device: str = "cpu") -> torch.Generator:
    """A torch generator seeded with ``seed`` (never the global RNG)."""
    return torch.Generator(device=device).manual_seed(int(seed))


def resolve_dtype(name: str, key: str = "protocol.dtype") -> torch.dtype:
    """torch dtype for a config string, with a one-line error naming ``key``."""
    return DTYPES[require_choice(key, name, DTYPES)]
