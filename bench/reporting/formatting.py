"""Number formatting for report tables: gaps as an em dash, never as a blank."""

from __future__ import annotations

import math

import pandas as pd

GAP = "—"


def format_number(value: float | None) -> str:
    """Scientific for |x| < 1e-3 or > 1e5 (``9.410e-06``), else 6 significant digits.

    Zero is ``0``; None and NaN are ``—``.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return GAP
    value = float(value)
    if value == 0.0:
        return "0"
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude < 1e-3 or magnitude > 1e5:
        return f"{value:.3e}"
    decimals = max(0, 5 - math.floor(math.log10(magnitude)))
    return f"{value:.{decimals}f}"


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
