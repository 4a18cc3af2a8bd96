"""Number formatting for report tables: gaps as an em dash, never as a blank."""

from __future__ import annotations

import math

import pandas as pd

GAP = "—"


LARGEST_EXACT_INTEGER = 2.0 ** 53


def integer_text(value: float) -> str | None:
    """``"84"`` for an integer-valued float (a count, a coverage of 25 points), else None."""
    if math.isfinite(value) and value.is_integer() and abs(value) <= LARGEST_EXACT_INTEGER:
        return str(int(value))
    return None


def format_number(value: float | None) -> str:
    """Integer-valued numbers as integers (``84``); otherwise scientific for |x| < 1e-3 or
    > 1e5 (``9.410e-06``), else 6 significant digits. None and NaN are ``—``.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return GAP
    value = float(value)
    if integer_text(value) is not None:
        return integer_text(value)
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude < 1e-3 or magnitude > 1e5:
        return f"{value:.3e}"
    decimals = max(0, 5 - math.floor(math.log10(magnitude)))
    return f"{value:.{decimals}f}"


def format_compact(value: float | None) -> str:
    """Four significant digits for the compact tables (``95.33``, ``1.235e-05``); integers as
    integers; None and NaN are ``—``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return GAP
    value = float(value)
    return integer_text(value) or f"{value:.4g}"


def format_mean_ci(mean: float, low: float, high: float) -> str:
    """``mean [low, high]``, or just the mean when the CI is undefined."""
    if math.isnan(mean):
        return GAP
    if math.isnan(low) or math.isnan(high):
        return format_number(mean)
    return f"{format_number(mean)} [{format_number(low)}, {format_number(high)}]"


def format_mean_stderr(mean: float, stderr: float) -> str:
    """``mean ± stderr``, or just the mean when the standard error is undefined."""
    if math.isnan(mean):
        return GAP
    if math.isnan(stderr):
        return format_number(mean)
    return f"{format_number(mean)} ± {format_number(stderr)}"


def markdown_table(frame: pd.DataFrame) -> str:
    """A pipe table of ``frame`` with cells kept as written (``100.00`` stays ``100.00``)."""
    cells = frame.map(lambda text: str(text).replace("|", r"\|"))
    return cells.to_markdown(index=False, disable_numparse=True)
