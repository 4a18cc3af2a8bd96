"""Explicit random generators, derived seeds and dtypes, made from config values, passed down."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch
from torch import Tensor

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


def _cuda_index(device: str | torch.device) -> int | None:
    """The CUDA device index of ``device`` (None for a CPU device)."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return torch.cuda.current_device() if device.index is None else device.index


@contextmanager
def seeded_global_rng(seed: int, device: str | torch.device = "cpu") -> Iterator[None]:
    """Torch's global RNG (the CPU one, and ``device``'s when it is a GPU) seeded with ``seed``
    inside the block and restored to the caller's state afterwards.

    For libraries that draw from the global RNG (dropout, bayesian-torch's layers): seeding it
    here makes their draws reproducible without touching the caller's random stream.
    """
    index = _cuda_index(device)
    with torch.random.fork_rng(devices=[] if index is None else [index]):
        torch.default_generator.manual_seed(int(seed))
        if index is not None:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(int(seed))
        yield


def global_rng_state(device: str | torch.device = "cpu") -> dict[str, Tensor | None]:
    """The global RNG's state (CPU, and ``device``'s when it is a GPU), for a checkpoint."""
    index = _cuda_index(device)
    return {"cpu": torch.get_rng_state(),
            "cuda": None if index is None else torch.cuda.get_rng_state(index)}


def set_global_rng_state(state: dict[str, Tensor | None],
                         device: str | torch.device = "cpu") -> None:
    """Restore a state :func:`global_rng_state` returned."""
    torch.set_rng_state(state["cpu"])
    index = _cuda_index(device)
    if index is not None and state["cuda"] is not None:
        torch.cuda.set_rng_state(state["cuda"], index)
