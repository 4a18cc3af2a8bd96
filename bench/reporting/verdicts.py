"""Verdict rules: how a reproduced number is judged against the number the paper prints.

The rules every report follows (one place, documented in the README):

- **a fit that failed is not judged**: a cell or claim whose statistic uses a fit that failed
  its health checks (:mod:`bench.metrics.fit_health`) is ``not comparable: fit failed``;
- **a count is compared as an integer** (:class:`Count`): a count that is not a whole number
  is refused, so a rounding residue (2.0000000000005 steps) cannot flip a verdict;
- **a ratio refuses a denominator under a stated floor** (:func:`ratio_above_floor`): the
  claim is "not measurable" and says by how much;
- **a tolerance below the statistic's own standard error defers to the CI**
  (:class:`Tolerance`): a cell whose difference exceeds the tolerance is judged on our 95% CI
  and standard error, not on a tolerance the noise cannot resolve;
- **a CI too wide to decide is inconclusive** (:class:`Tolerance`): a difference within the
  tolerance agrees whatever the CI; beyond it, a paper value inside our CI (read when the
  rule uses its CI or the tolerance is below our standard error) agrees only when the CI
  stays inside the close band (``close`` times the tolerance around the paper value); a CI
  that reaches past it (two seeds give a Student-t factor of 12.7) cannot tell agreement
  from a difference, and the cell is ``inconclusive``, with its CI as the cause;
- **a claim's statistic is the claim's own quantity** (:class:`Sign`): a rise is the end
  minus the start, judged by whether its 95% CI over seeds excludes zero (inconclusive when
  it holds zero);
- **seconds measured on other hardware than the paper's are not comparable**, nor ratios of
  them (:func:`bench.reporting.compare.hardware_reason`), in every report.

Every rule returns one of ``agrees``, ``close``, ``differs`` or ``inconclusive`` for a cell
that has an ok value. The other verdicts are decided before any rule runs:
``not comparable`` (both numbers exist, but they measure different things: a stand-in for
the paper's method, seconds on other hardware; the spec says why,
:attr:`~bench.reporting.spec.ArtifactSpec.not_comparable`), which is never counted as
agreeing or differing, and the gaps ``no paper value`` (we have a number, the paper has
none), ``missing`` (no ok record for the cell), ``failed`` (every record meant to produce
the cell failed) and ``needs data`` (the cell's data files are not on this machine).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bench.reporting.targets import PaperValue, printed_exponent, round_as_printed

AGREES = "agrees"
CLOSE = "close"
DIFFERS = "differs"
NOT_COMPARABLE = "not comparable"
NO_PAPER_VALUE = "no paper value"
MISSING = "missing"
FAILED = "failed"
NEEDS_DATA = "needs data"
INCONCLUSIVE = "inconclusive"
VERDICTS = (AGREES, CLOSE, DIFFERS, INCONCLUSIVE, NOT_COMPARABLE, NO_PAPER_VALUE, MISSING,
            FAILED, NEEDS_DATA)
# Verdicts a rule gives a finite value (the ones a failed fit or a declared mismatch replaces).
JUDGED = (AGREES, CLOSE, DIFFERS, INCONCLUSIVE)
# Verdicts that need a cause naming their evidence, under the paper's protocol.
CAUSE_REQUIRED = (DIFFERS, CLOSE)
# Verdicts that leave a paper number unconfirmed, in the order FINDINGS.md lists them.
UNCONFIRMED = (DIFFERS, FAILED, MISSING, NEEDS_DATA, CLOSE, INCONCLUSIVE, NOT_COMPARABLE)


class NotMeasurable(ArithmeticError):
    """A statistic that cannot be measured on these records (a ratio whose denominator is
    below its floor); its message is the verdict's cause after "not measurable: "."""


@dataclass(frozen=True)
class Estimate:
    """A claim statistic with its 95% CI over seeds (NaN bounds when it has none)."""

    value: float
    low: float = math.nan
    high: float = math.nan

    def __float__(self) -> float:
        return float(self.value)


def ratio_above_floor(numerator: float, denominator: float, floor: float, what: str) -> float:
    """``numerator / denominator``, or :class:`NotMeasurable` when ``|denominator|`` is below
    ``floor`` (``what`` names the denominator in the message)."""
    if not math.fabs(denominator) >= floor:
        raise NotMeasurable(f"{what} {denominator:.3g} below {floor:g}")
    return numerator / denominator


@dataclass(frozen=True)
class Verdict:
    """A verdict and the one-line cause shown beside it (empty when it agrees)."""

    verdict: str
    cause: str = ""


class VerdictRule:
    """Base of the rules. Subclasses implement :meth:`classify` and :meth:`describe`."""

    def reference(self) -> str | None:
        """Text of the rule's own reference when it needs no paper value (e.g. a range)."""
        return None

    def inconclusive_cause(self, paper: PaperValue, ci: tuple[float, float]) -> str:
        """Why a cell this rule called ``inconclusive`` could not be decided (rules that
        never return it need not say)."""
        return ""

    def classify(self, ours: float, paper: PaperValue | None, ci: tuple[float, float],
                 stderr: float = math.nan) -> str:
        """``agrees``, ``close``, ``differs`` or ``inconclusive`` for a finite ``ours`` (``no
        paper value`` when the rule needs a paper value and there is none); ``stderr`` is our
        standard error over seeds (NaN with one seed)."""
        raise NotImplementedError

    def describe(self) -> str:
        """One sentence saying what counts as agreeing, for the report's notes."""
        raise NotImplementedError


@dataclass(frozen=True)
class PrintedDigits(VerdictRule):
    """Agrees iff ours, rounded to the paper's printed decimals, equals the printed value.

    Close iff ours is within ``close_units`` steps of the last printed digit (plus the half
    step of rounding), i.e. it rounds to a neighbouring printed value.
    """

    close_units: int = 1

    def classify(self, ours: float, paper: PaperValue | None, ci: tuple[float, float],
                 stderr: float = math.nan) -> str:
        if paper is None:
            return NO_PAPER_VALUE
        if round_as_printed(ours, paper.printed) == paper.value:
            return AGREES
        step = 10.0 ** (printed_exponent(paper.printed) - paper.decimals)
        return CLOSE if abs(ours - paper.value) <= (self.close_units + 0.5) * step else DIFFERS

    def describe(self) -> str:
        return (
            "agrees when ours rounds to the paper's printed digits; close when it rounds to a "
            f"value within {self.close_units} unit(s) of the last printed digit"
        )


@dataclass(frozen=True)
class Tolerance(VerdictRule):
    """Agrees if ``|ours - paper| <= abs + rel*|paper|``, or if the paper value is inside our
    CI and the CI lies inside the close band; inconclusive if the paper value is inside a CI
    that reaches past the close band.

    The close band is ``close`` times the tolerance around the paper value: a difference
    inside it is close, beyond it differs. ``use_ci=False`` judges the difference alone. A
    tolerance below our standard error over seeds defers to the CI whatever ``use_ci`` says:
    the noise cannot resolve it, so a paper value inside our CI is judged as above
    (agrees or inconclusive), and one outside on the standard error (close within ``close``
    standard errors, else differs).
    """

    abs: float = 0.0
    rel: float = 0.0
    close: float = 3.0
    use_ci: bool = True

    def tolerance(self, paper: PaperValue) -> float:
        """The stated tolerance around ``paper``: ``abs + rel*|paper|``."""
        return self.abs + self.rel * math.fabs(paper.value)

    def classify(self, ours: float, paper: PaperValue | None, ci: tuple[float, float],
                 stderr: float = math.nan) -> str:
        if paper is None:
            return NO_PAPER_VALUE
        tolerance = self.tolerance(paper)
        difference = math.fabs(ours - paper.value)
        if difference <= tolerance:
            return AGREES
        below_noise = math.isfinite(stderr) and tolerance < stderr
        low, high = ci
        if ((self.use_ci or below_noise) and math.isfinite(low) and math.isfinite(high)
                and low <= paper.value <= high):
            band = self.close * tolerance
            inside_band = paper.value - band <= low and high <= paper.value + band
            return AGREES if inside_band else INCONCLUSIVE
        scale = stderr if below_noise else tolerance
        return CLOSE if difference <= self.close * scale else DIFFERS

    def inconclusive_cause(self, paper: PaperValue, ci: tuple[float, float]) -> str:
        band = self.close * self.tolerance(paper)
        return (f"our 95% CI [{ci[0]:.4g}, {ci[1]:.4g}] holds the paper value and reaches "
                f"past the close band (paper ± {band:.3g}): the seeds cannot tell agreement "
                "from a difference")

    def describe(self) -> str:
        ci = (" or the paper value lies in our 95% CI and the CI inside the close band"
              if self.use_ci else " (our CI not used unless the tolerance is below our "
              "standard error)")
        return (
            f"agrees when |ours - paper| <= {self.abs:g} + {self.rel:g}*|paper|{ci}; "
            f"close within {self.close:g} times that tolerance (the close band); "
            "inconclusive when the paper value lies in a 95% CI that reaches past the close "
            "band; a tolerance below our standard error over seeds defers to the CI, and a "
            "paper value outside it is judged on the standard error"
        )


@dataclass(frozen=True)
class Factor(VerdictRule):
    """For magnitudes: agrees within a factor ``agree`` of the paper, close within ``close``.

    Values of opposite sign, or a zero against a nonzero, differ.
    """

    close: float = 3.0
    agree: float = 1.5

    def classify(self, ours: float, paper: PaperValue | None, ci: tuple[float, float],
                 stderr: float = math.nan) -> str:
        if paper is None:
            return NO_PAPER_VALUE
        if ours == 0.0 and paper.value == 0.0:
            return AGREES
        if ours * paper.value <= 0.0:
            return DIFFERS
        ratio = max(ours / paper.value, paper.value / ours)
        if ratio <= self.agree:
            return AGREES
        return CLOSE if ratio <= self.close else DIFFERS

    def describe(self) -> str:
        return (
            f"agrees within a factor {self.agree:g} of the paper value, close within a factor "
            f"{self.close:g}"
        )


@dataclass(frozen=True)
class Interval(VerdictRule):
    """Ours must lie in a range the paper states in words (e.g. "1e-11 to 1e-10").

    Agrees inside ``[low, high]``; close within a factor ``close_factor`` of the range (for a
    positive range ``[low/f, high*f]``, otherwise the range widened by ``(f-1)`` widths).
    Needs no paper value: the range is the reference.
    """

    low: float
    high: float
    close_factor: float = 10.0

    def reference(self) -> str:
        return f"{self.low:g} to {self.high:g}"

    def classify(self, ours: float, paper: PaperValue | None, ci: tuple[float, float],
                 stderr: float = math.nan) -> str:
        if self.low <= ours <= self.high:
            return AGREES
        if self.low > 0:
            near_low, near_high = self.low / self.close_factor, self.high * self.close_factor
        else:
            margin = (self.close_factor - 1.0) * (self.high - self.low)
            near_low, near_high = self.low - margin, self.high + margin
        return CLOSE if near_low <= ours <= near_high else DIFFERS

    def describe(self) -> str:
        return (
            f"agrees inside [{self.low:g}, {self.high:g}]; close within a factor "
            f"{self.close_factor:g} of that range"
        )


@dataclass(frozen=True)
class Count(VerdictRule):
    """For counts (grid steps, cases): agrees when the count is at most ``agree``, close when
    at most ``close``. The count must be a whole number: anything else is refused
    (ValueError), so a float residue cannot move a count across its threshold."""

    agree: int = 0
    close: int = 1

    def reference(self) -> str:
        return f"count <= {self.agree}"

    def classify(self, ours: float, paper: PaperValue | None, ci: tuple[float, float],
                 stderr: float = math.nan) -> str:
        if ours != int(ours):
            raise ValueError(f"a count must be a whole number, got {ours!r}")
        count = int(ours)
        if count <= self.agree:
            return AGREES
        return CLOSE if count <= self.close else DIFFERS

    def describe(self) -> str:
        return f"a count agrees when at most {self.agree} and is close when at most {self.close}"


@dataclass(frozen=True)
class Sign(VerdictRule):
    """For a claimed rise or fall (a difference of the claim's own quantity, e.g. the end
    minus the start): agrees when the 95% CI over seeds lies beyond zero on the claimed side,
    differs when it lies beyond zero on the other side, and is inconclusive when it holds
    zero (the records cannot tell the sign). Without a CI (one seed) only the sign is read:
    close at best."""

    positive: bool = True

    def reference(self) -> str:
        return f"CI of the change {'above' if self.positive else 'below'} 0"

    def classify(self, ours: float, paper: PaperValue | None, ci: tuple[float, float],
                 stderr: float = math.nan) -> str:
        sign = 1.0 if self.positive else -1.0
        low, high = sorted((sign * ci[0], sign * ci[1]))
        if math.isfinite(low) and math.isfinite(high):
            if low > 0:
                return AGREES
            return DIFFERS if high < 0 else INCONCLUSIVE
        return CLOSE if sign * ours > 0 else DIFFERS

    def inconclusive_cause(self, paper: PaperValue, ci: tuple[float, float]) -> str:
        return (f"our 95% CI of the change [{ci[0]:.3g}, {ci[1]:.3g}] holds zero: the seeds "
                "cannot tell its sign")

    def describe(self) -> str:
        side = "above" if self.positive else "below"
        return (f"a change agrees when its 95% CI over seeds lies {side} zero, differs when it "
                "lies on the other side, and is inconclusive when it holds zero")


def judge(
    rule: VerdictRule,
    paper: PaperValue | None,
    ours: float,
    ci: tuple[float, float],
    cause: str = "",
    stderr: float = math.nan,
) -> Verdict:
    """Apply ``rule`` to one cell that has a value; attach ``cause`` unless it agrees.

    ``ours`` is the value to compare (the paper seed's value if there is one, else the mean);
    ``stderr`` our standard error over seeds. A non-finite ``ours`` is reported as
    ``missing``.
    """
    if not math.isfinite(ours):
        return Verdict(MISSING, "no finite value")
    if paper is None and rule.reference() is None:
        return Verdict(NO_PAPER_VALUE, cause)
    verdict = rule.classify(ours, paper, ci, stderr)
    if verdict == INCONCLUSIVE:
        return Verdict(verdict, rule.inconclusive_cause(paper, ci))
    return Verdict(verdict, "" if verdict == AGREES else cause)
