"""Paper values from ``bench/targets/<paper>.csv``, with each number's printed string kept.

The printed string (``"-0.0259"``, ``"9.41e-6"``, ``"100.00"``) carries the paper's precision,
which the :class:`~bench.reporting.verdicts.PrintedDigits` rule compares against.
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from importlib import resources

TARGET_FIELDS = ("paper_file", "artifact", "row", "column", "value", "stderr", "unit", "note")


@dataclass(frozen=True)
class PaperValue:
    """One number the paper prints, as printed (value and optional ``±`` part)."""

    artifact: str
    row: str
    column: str
    printed: str
    stderr_printed: str = ""
    unit: str = ""
    note: str = ""

    @property
    def value(self) -> float:
        """The printed number as a float."""
        return float(self.printed)

    @property
    def stderr(self) -> float | None:
        """The printed ``±`` value as a float, or None when the paper prints none."""
        return float(self.stderr_printed) if self.stderr_printed else None

    @property
    def decimals(self) -> int:
        """Digits after the decimal point, of the mantissa for scientific notation."""
        return printed_decimals(self.printed)

    def display(self) -> str:
        """The printed value with its ``±`` part, e.g. ``"9.41e-6 ± 1.3e-6"``."""
        return f"{self.printed} ± {self.stderr_printed}" if self.stderr_printed else self.printed


def printed_decimals(printed: str) -> int:
    """Decimals shown in a printed number: ``"-0.0259"`` -> 4, ``"9.41e-6"`` -> 2, ``"6"`` -> 0."""
    mantissa = printed.strip().lower().split("e")[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


def is_scientific(printed: str) -> bool:
    """Whether a printed number uses an exponent (``9.41e-6``)."""
    return "e" in printed.strip().lower()


def printed_exponent(printed: str) -> int:
    """The power of ten of a scientific printed number (0 for fixed notation)."""
    return int(printed.strip().lower().split("e")[1]) if is_scientific(printed) else 0


def round_as_printed(value: float, printed: str) -> float:
    """``value`` rounded the way ``printed`` is written (same notation and decimals)."""
    decimals = printed_decimals(printed)
    style = "e" if is_scientific(printed) else "f"
    return float(f"{value:.{decimals}{style}}")


@functools.cache
def load_targets(paper: str) -> tuple[PaperValue, ...]:
    """Every row of ``bench/targets/<paper>.csv`` in file order.

    Raises FileNotFoundError for a paper without a targets file.
    """
    source = resources.files("bench") / "targets" / f"{paper}.csv"
    if not source.is_file():
        raise FileNotFoundError(f"no targets file for paper {paper!r}: {source}")
    reader = csv.DictReader(io.StringIO(source.read_text(encoding="utf-8")))
    return tuple(
        PaperValue(
            artifact=line["artifact"], row=line["row"], column=line["column"],
            printed=line["value"].strip(), stderr_printed=line["stderr"].strip(),
            unit=line["unit"], note=line["note"],
        )
        for line in reader
    )


def paper_values(paper: str, artifacts: tuple[str, ...]) -> dict[tuple[str, str], PaperValue]:
    """Paper values of the given artifacts keyed by ``(row, column)``, in file order.

    Raises ValueError if two of the artifacts share a ``(row, column)`` key.
    """
    found: dict[tuple[str, str], PaperValue] = {}
    for target in load_targets(paper):
        if target.artifact not in artifacts:
            continue
        key = (target.row, target.column)
        if key in found:
            raise ValueError(f"{paper}: cell {key} appears in two of the artifacts {artifacts}")
        found[key] = target
    return found
