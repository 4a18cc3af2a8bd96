"""Errors a user can fix from the command line, reported as one line without a traceback."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any


class ConfigError(ValueError):
    """A config key holds a value the harness cannot use."""


def require_choice(key: str, value: Any, choices: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``choices``, else raise a one-line ConfigError."""
    options = list(choices)
    if value not in options:
        listed = ", ".join(str(c) for c in options)
        raise ConfigError(f"{key}={value!r} is not valid; choose one of: {listed}")
    return value


def require_positive(key: str, value: Any) -> Any:
    """Return ``value`` if it is a positive number, else raise a one-line ConfigError."""
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{key}={value!r} is not valid; it must be a positive number")
    return value


def require_int_at_least(key: str, value: Any, minimum: int, why: str) -> int:
    """Return ``value`` if it is an integer (not a bool) of at least ``minimum``, else raise a
    one-line ConfigError naming ``key`` and saying ``why``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key}={value!r} is not valid; {why}")
    return value


def require_positive_int(key: str, value: Any) -> int:
    """``value`` if it is an integer >= 1, else a one-line ConfigError naming ``key``."""
    return require_int_at_least(key, value, 1, "it must be a positive integer")


def physical_memory_bytes() -> int:
    """This machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def require_fits_in_memory(key: str, value: Any, needed_bytes: float, what: str) -> Any:
    """Return ``value`` if ``needed_bytes`` (``what`` it allocates, for the message) fit in
    this machine's physical memory, else raise a one-line ConfigError naming ``key``."""
    available = physical_memory_bytes()
    if needed_bytes > available:
        raise ConfigError(f"{key}={value!r} is not valid here: {what} need about "
                          f"{needed_bytes / 2**30:,.0f} GiB, more than this machine's "
                          f"{available / 2**30:,.0f} GiB")
    return value
