"""Causes of the Generalized Laplace reports (:mod:`bench.reporting.specs.generalized_laplace`),
computed from the records.

Each builder returns an anchor's cause: the measured order of the toy's structures with its
ties (a pair counts as ordered only beyond both 95% CIs), the temperature pairs going against
a monotonicity claim and whether they lie inside the seeds' intervals, where a curve levels
off and how much of the posterior the prior still sets, and what the sensitivity rows run
beside the main ones measure (the paper-like accumulation of reproduction notes 7.6, the
hypothesis for the paper's K-FAC, and delta = 1), saying "no measured cause yet" where none
of them accounts for a difference. The row names, thresholds and statistics these causes
apply to the sensitivity rows are defined here and read by the specs too.
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

from bench.reporting.claims import (
    ClaimRule,
    Means,
    Statistic,
    Summary,
    cell_means,
    mean_of,
    summarise_cells,
)
from bench.reporting.figures.structures_plots import temperature_curve
from bench.reporting.verdicts import AGREES, NotMeasurable, ratio_above_floor
from bench.tasks.tempered_classification import NORM_COLUMNS

# The paper's order of uncertainty on the toy, smallest first (Figure 2's caption).
PAPER_TOY_ORDER = ("KFAC", "Diag", "EKFAC", "B-Diag")
PAPER_LIKE = "paper-like"
TIE, ORDERED, REVERSED = "≈", "<", ">"
# A 'levels off' share is not measured on a total change over the grid below this (the
# metric's units: nats of entropy, accuracy as a fraction).
TOTAL_CHANGE_FLOOR = {"entropy": 0.01, "accuracy": 0.01}
TEMPERED_ROWS = ("Diag", "KFAC", "EKFAC")
PAPER_KFAC_NORM = 1.0985e9
EXACT_NORM, PAPER_LIKE_NORM = NORM_COLUMNS
SENSITIVITY_DELTA = 1.0
# Structures whose paper-like precision is T c F + delta I (one factor c, notes 7.6).
SCALED_BY_LIBRARY = ("Diag", "EKFAC")
# The claim rules of Figure 3's anchors on the accuracy at the largest T and on K-FAC's norm
# against the others', which their causes apply to the sensitivity rows too.
NEAR_MAP = ClaimRule(agree=0.95, close=0.9)
FAR_LARGER = ClaimRule(agree=1.0, close=0.5)

Summaries = dict[tuple[str, str], Summary]


def paper_like(row: str) -> str:
    """The row of ``row``'s structure under the paper-like accumulation (notes 7.6)."""
    return f"{row} ({PAPER_LIKE})"


def _bounds(summary: Summary) -> tuple[float, float]:
    """The 95% CI, or the mean as both bounds where there is none (one seed)."""
    low = summary.low if math.isfinite(summary.low) else summary.mean
    high = summary.high if math.isfinite(summary.high) else summary.mean
    return low, high


def pair_order(first: Summary, second: Summary) -> str:
    """``<`` when ``first`` lies below ``second`` beyond both 95% CIs (the intervals do not
    overlap), ``>`` when above beyond them, ``≈`` (a tie) when the intervals overlap."""
    (first_low, first_high), (second_low, second_high) = _bounds(first), _bounds(second)
    if first_high < second_low:
        return ORDERED
    if second_high < first_low:
        return REVERSED
    return TIE


def toy_summaries(summaries: Summaries, rows: tuple[str, ...], column: str) -> list[Summary]:
    """The summaries of ``column`` for ``rows``, in their order (LookupError naming the rows
    that have none)."""
    found = [summaries.get((row, column)) for row in rows]
    if None in found:
        missing = [row for row, value in zip(rows, found, strict=True) if value is None]
        raise LookupError(f"no {column} for {', '.join(missing)}")
    return found


def _number(value: float) -> str:
    return f"{value:.3g}"


def _with_interval(summary: Summary) -> str:
    if not (math.isfinite(summary.low) and math.isfinite(summary.high)):
        return _number(summary.mean)
    return f"{_number(summary.mean)} [{_number(summary.low)}, {_number(summary.high)}]"


def measured_order(summaries: Summaries, rows: tuple[str, ...], column: str) -> str:
    """The rows sorted by their mean ``column``, neighbours joined by ``<`` (separated beyond
    their 95% CIs) or ``≈`` (overlapping CIs, a tie), each with its mean [CI]."""
    values = dict(zip(rows, toy_summaries(summaries, rows, column), strict=True))
    ordered = sorted(rows, key=lambda row: values[row].mean)
    text = f"{ordered[0]} {_with_interval(values[ordered[0]])}"
    for before, row in pairwise(ordered):
        text += f" {pair_order(values[before], values[row])} {row} {_with_interval(values[row])}"
    return text


def _pair_outcomes(summaries: Summaries, rows: tuple[str, ...], column: str) -> str:
    values = toy_summaries(summaries, rows, column)
    words = {ORDERED: "holds", TIE: "tie", REVERSED: "reversed"}
    return ", ".join(f"{a} < {b} {words[pair_order(x, y)]}" for (a, b), (x, y) in
                     zip(pairwise(rows), pairwise(values), strict=True))


def toy_order_cause(activation: str, column: str = "mean_sd",
                    rows: tuple[str, ...] = PAPER_TOY_ORDER):
    """Anchor cause: the measured order with its ties and, from the paper-like rows of the
    same jobs (same networks and standard-normal draws), what the library's accumulation
    (notes 7.6) does to K-FAC's spread."""

    def cause(records: list[dict[str, Any]]) -> str:
        summaries = summarise_cells(records)
        key = f"{activation}/{column}"
        seeds = len({r["seed"] for r in records})
        text = (f"measured over {seeds} seed(s), mean [95% CI]: "
                f"{measured_order(summaries, rows, key)} "
                f"({_pair_outcomes(summaries, rows, key)})")
        hypothesis = all(PAPER_LIKE in row for row in rows)
        try:
            verdict = paper_like_toy_verdict(summaries, key, quote_order=not hypothesis)
        except LookupError:
            return text + "; no measured cause yet: no paper-like rows in these records"
        if hypothesis:
            return (f"{text}; {verdict}; the pairs that are not ordered here have no "
                    "measured cause yet")
        return f"{text}; {verdict}"

    return cause


def paper_like_toy_verdict(summaries: Summaries, key: str, quote_order: bool = True) -> str:
    """What the paper-like rows (notes 7.6) say about K-FAC being the smallest on the toy."""
    rows = tuple(map(paper_like, PAPER_TOY_ORDER))
    toy_summaries(summaries, (*rows, "KFAC"), key)
    kfac, exact_kfac = summaries[(paper_like("KFAC"), key)], summaries[("KFAC", key)]
    smallest = all(pair_order(kfac, summaries[(row, key)]) == ORDERED
                   for row in rows if row != paper_like("KFAC"))
    verdict = ("K-FAC becomes the smallest beyond the CIs, as in the paper: the hypothesis "
               "explains K-FAC's place" if smallest else
               "K-FAC does not become the smallest beyond the CIs: the hypothesis does not "
               "explain K-FAC's place")
    text = (f"the library's accumulation (paper-like rows, same networks and draws) takes "
            f"K-FAC from {_number(exact_kfac.mean)} to {_number(kfac.mean)}; {verdict}")
    if quote_order:
        text += f"; its order: {measured_order(summaries, rows, key)}"
    return text


def with_delta(row: str, delta: float = SENSITIVITY_DELTA) -> str:
    """The row of the prior-precision sensitivity check, marked as
    :func:`bench.tasks.tempered_classification.structure_row` marks it: ``Diag (delta=1)``,
    ``KFAC (paper-like, delta=1)``."""
    mark = f"delta={delta:g}"
    return f"{row[:-1]}, {mark})" if row.endswith(")") else f"{row} ({mark})"


def measured_curve(means: Means, row: str, data_set: str, metric: str
                   ) -> list[tuple[float, float]]:
    """``row``'s ``data_set``/``metric`` curve over T (:func:`temperature_curve`); LookupError
    when it has fewer than two points."""
    curve = temperature_curve(means, row, data_set, metric)
    if len(curve) < 2:
        raise LookupError(f"no {data_set}/{metric} curve for {row}")
    return curve


def monotone_cause(data_set: str, metric: str, rising: bool,
                   rows: tuple[str, ...] = TEMPERED_ROWS):
    """Anchor cause: the neighbouring pairs that go against the claim, how far, and whether
    each change lies inside the two points' 95% CIs over the seeds."""

    def cause(records: list[dict[str, Any]]) -> str:
        summaries = summarise_cells(records)
        against, total = [], 0
        for row in rows:
            curve = temperature_curve(summaries, row, data_set, metric)
            total += max(len(curve) - 1, 0)
            for (t0, a), (t1, b) in pairwise(curve):
                change = b.mean - a.mean
                if (change < 0) if rising else (change > 0):
                    against.append((abs(change), row, t0, t1, change, pair_order(a, b) == TIE))
        if not against:
            raise LookupError("no pair goes against the claim")
        against.sort(reverse=True)
        listed = "; ".join(f"{row} T={t0:g}->{t1:g} {change:+.3g}"
                           for _, row, t0, t1, change, _ in against[:3])
        beyond = [item for item in against if not item[-1]]
        head = (f"{len(against)} of {total} neighbouring pairs go against the claim "
                f"(largest: {listed})")
        seeds = len({r["seed"] for r in records})
        if seeds < 2:
            return f"no measured cause yet: {head}; one seed, so no interval to judge them by"
        if not beyond:
            return (f"{head}; every one lies inside the two points' 95% CIs over the {seeds} "
                    "seeds: seed-to-seed spread (network, draws and test subset vary with the "
                    "seed), not a measured trend")
        return (f"no measured cause yet: {head}; {len(beyond)} of them beyond the two points' "
                "95% CIs")

    return cause


def remaining_change(row: str, data_set: str, metric: str, from_t: float) -> Statistic:
    """How much of the metric's total change over the grid happens above ``from_t``:
    ``|m(T=from_t) - m(T_max)| / |m(T_min) - m(T_max)|`` (0: flat from ``from_t`` on); not
    measurable (:class:`NotMeasurable`) when the total change is below ``TOTAL_CHANGE_FLOOR``
    of the metric."""

    def statistic(means: Means) -> float:
        curve = dict(measured_curve(means, row, data_set, metric))
        if from_t not in curve:
            raise LookupError(f"T={from_t:g} is not on the grid")
        ts = sorted(curve)
        return ratio_above_floor(abs(curve[from_t] - curve[ts[-1]]),
                                 abs(curve[ts[0]] - curve[ts[-1]]),
                                 TOTAL_CHANGE_FLOOR[metric],
                                 f"{row}'s total {metric} change over the grid")

    return statistic


def levelling_temperature(means: Means, row: str, data_set: str, metric: str,
                          share: float) -> float | None:
    """The smallest grid T above which at most ``share`` of the curve's change is left (None
    when no grid point but the last)."""
    curve = measured_curve(means, row, data_set, metric)
    for t, _ in curve[:-1]:
        if remaining_change(row, data_set, metric, t)(means) <= share:
            return t
    return None


def prior_dominated_share(records: list[dict[str, Any]], row: str, temperature: float
                          ) -> float:
    """Mean over the records of ``row`` of the share of the posterior's eigen-directions
    whose likelihood part is below the prior precision at ``temperature`` (the records'
    ``<row>/prior_dominated_share`` arrays)."""
    values = []
    for record in records:
        arrays = record.get("arrays") or {}
        shares, ts = arrays.get(f"{row}/prior_dominated_share"), arrays.get("temperatures")
        if shares and ts and temperature in ts:
            values.append(float(shares[ts.index(temperature)]))
    if not values:
        raise LookupError(f"no prior-dominated share of {row} at T={temperature:g}")
    return mean_of(values)


def _levels_from(means: Means, row: str, data_set: str, metric: str, share: float) -> str:
    t = levelling_temperature(means, row, data_set, metric, share)
    return f"levels off from T = {t:g}" if t is not None else "does not level off on the grid"


def _norm_ratio(means: Means, row: str) -> float:
    """The records' paper-like / exact last-layer norm of a structure: the factor the
    library's accumulation puts on its curvature (Diag, EKFAC)."""
    exact, library = means.get((row, EXACT_NORM)), means.get((row, PAPER_LIKE_NORM))
    if not exact or library is None:
        raise LookupError(f"no norms of {row}")
    return library / exact


def levelling_cause(row: str, data_set: str, metric: str, from_t: float,
                    rule: ClaimRule):
    """Anchor cause of a 'levels off above T0' claim: where our curve levels off, how much
    of the posterior the prior still sets at T0, and what the sensitivity rows (the
    paper-like accumulation, delta = 1) measure for the same statistic."""

    def cause(records: list[dict[str, Any]]) -> str:
        means = cell_means(records)
        ours = remaining_change(row, data_set, metric, from_t)(means)
        parts = [f"{row} leaves {ours:.2f} of its change above T = {from_t:g} (total change "
                 f"over the grid {_total_change(means, row, data_set, metric):.3g}) and "
                 f"{_levels_from(means, row, data_set, metric, rule.agree)}"]
        if PAPER_LIKE in row:
            parts[0] = ("the hypothesis (the library's accumulation, same networks, curvature "
                        f"and draws) does not reach the paper's levelling: {parts[0]}")
        try:
            share = prior_dominated_share(records, row, from_t)
            parts.append(f"at T = {from_t:g}, {share:.0%} of its posterior's eigen-directions "
                         "have T F below delta (the prior sets their spread)")
        except LookupError:
            pass
        explained, absent = [], []
        checks = [(with_delta(row), "delta = 1 (sensitivity row)")]
        if PAPER_LIKE not in row:
            checks.insert(0, (paper_like(row), "the library's accumulation (paper-like row, "
                                               "same networks, curvature and draws)"))
        for other, what in checks:
            try:
                value = remaining_change(other, data_set, metric, from_t)(means)
            except LookupError:
                if not (PAPER_LIKE in other and row in SCALED_BY_LIBRARY):
                    absent.append(other)
                continue
            except NotMeasurable as err:
                parts.append(f"{what}: not measurable ({err})")
                continue
            levels = _levels_from(means, other, data_set, metric, rule.agree)
            parts.append(f"{what} leaves {value:.2f} (total change "
                         f"{_total_change(means, other, data_set, metric):.3g}) and {levels}")
            if rule.classify(value, None, (math.nan, math.nan)) == AGREES:
                explained.append(what)
        if absent:
            parts.append(f"not in these records: {', '.join(absent)}")
        if row in SCALED_BY_LIBRARY:
            try:
                ratio = _norm_ratio(means, row)
            except LookupError:
                ratio = None
            if ratio is not None:
                level = levelling_temperature(means, row, data_set, metric, rule.agree)
                where = (f", so it would level off from T = {level / ratio:.3g}"
                         if level is not None else "")
                parts.append(f"the library's accumulation of {row} is {ratio:.3g} F (norm "
                             f"cells, paper-like / exact): with the same draws its curve is "
                             f"ours moved {-math.log10(ratio):+.2f} decades in T{where}")
        if explained:
            parts.append(f"measured candidate: {' and '.join(explained)} reaches the paper's "
                         "levelling")
        else:
            parts.append("no measured cause yet: no sensitivity row reaches the paper's "
                         "levelling")
        return "; ".join(parts)

    return cause


def _total_change(means: Means, row: str, data_set: str, metric: str) -> float:
    """``|m(T_min) - m(T_max)|`` of the mean-over-seeds curve."""
    curve = measured_curve(means, row, data_set, metric)
    return abs(curve[0][1] - curve[-1][1])


def value_at_largest_t(row: str, data_set: str, metric: str) -> Statistic:
    """The mean-over-seeds ``metric`` at the largest temperature of the grid."""
    return lambda means: measured_curve(means, row, data_set, metric)[-1][1]


def _metric_mean(records: list[dict[str, Any]], name: str) -> float:
    return mean_of(float(r["metrics"][name]) for r in records if name in r.get("metrics", {}))


def largest_t_accuracy_cause(row: str, data_set: str, main_row: str | None = None):
    """Anchor cause of 'accuracy rises to the trained network's at the largest T': the MAP
    networks' accuracy, the share of directions the prior still sets and, for a sensitivity
    row, the main row's value on the same networks, curvature and draws."""

    def cause(records: list[dict[str, Any]]) -> str:
        means = cell_means(records)
        ours = value_at_largest_t(row, data_set, "accuracy")(means)
        t_max = measured_curve(means, row, data_set, "accuracy")[-1][0]
        parts = [f"{row} reaches {ours:.3f} at T = {t_max:g}"]
        main = None
        if main_row is not None:
            try:
                main = value_at_largest_t(main_row, data_set, "accuracy")(means)
                parts.append(f"{main_row} {main:.3f} on the same networks, curvature and "
                             "draws")
            except LookupError:
                pass
        try:
            parts.append(f"the MAP networks {_metric_mean(records, 'map_test_accuracy'):.3f}")
        except LookupError:
            pass
        try:
            share = prior_dominated_share(records, row, t_max)
            parts.append(f"{share:.0%} of its eigen-directions still have T F below delta at "
                         f"T = {t_max:g} (their draws keep the prior's spread)")
        except LookupError:
            pass
        text = "; ".join(parts)
        if main is not None and NEAR_MAP.classify(main, None, (math.nan, math.nan)) == AGREES:
            return text + (": only delta differs and the main row meets the claim, so the "
                           "prior precision causes it")
        return "no measured cause yet: " + text

    return cause


def structure_norm(row: str, column: str):
    """Anchor getter: the mean over seeds of one structure's last-layer norm cell (the
    records of that structure, exact accumulation, main prior precision, only)."""

    def get(records: list[dict[str, Any]]) -> float:
        value = cell_means(records).get((row, column))
        if value is None:
            raise LookupError(f"no {column} of {row}")
        return value

    return get


def kfac_over_others(column: str):
    """Anchor getter: ``log10`` of K-FAC's last-layer norm over the larger of Diag's and
    EKFAC's (orders of magnitude by which K-FAC's is larger)."""

    def get(records: list[dict[str, Any]]) -> float:
        kfac = structure_norm("KFAC", column)(records)
        others = max(structure_norm(row, column)(records) for row in ("Diag", "EKFAC"))
        return math.log10(kfac / others)

    return get


def _norms_text(means: Means, column: str) -> str:
    return ", ".join(f"{row} {_number(means[(row, column)])}" for row in TEMPERED_ROWS
                     if (row, column) in means)


def _updates(records: list[dict[str, Any]]) -> int:
    values = {int(r["fitted"]["library_updates"]) for r in records
              if "library_updates" in (r.get("fitted") or {})}
    if not values:
        raise LookupError("no library_updates in the records")
    return max(values)


def exact_norm_cause(records: list[dict[str, Any]]) -> str:
    """Cause of the correctly scaled K-FAC norm anchor: the same curvature's paper-like
    norm (the hypothesis row) and how far the accumulation moves it."""
    means = cell_means(records)
    exact = structure_norm("KFAC", EXACT_NORM)(records)
    library = structure_norm("KFAC", PAPER_LIKE_NORM)(records)
    gap, remaining = math.log10(exact / PAPER_KFAC_NORM), math.log10(library / PAPER_KFAC_NORM)
    return (f"correctly scaled (F = N E[qq^T] kron E[gg^T]) the last-layer norms are "
            f"{_norms_text(means, EXACT_NORM)}; K-FAC's is {gap:+.2f} orders from the "
            f"paper's. The same K-FAC accumulated as the DLR library does (norm cells, "
            f"paper-like) is {_number(library)}: the accumulation moves it "
            f"{remaining - gap:+.2f} orders, leaving {remaining:+.2f} (hypothesis row)")


def paper_like_norm_cause(records: list[dict[str, Any]]) -> str:
    """Cause of the paper-like K-FAC norm anchor: the factor U^2 / N from the records and
    the part of the gap that no measurement explains."""
    exact = structure_norm("KFAC", EXACT_NORM)(records)
    library = structure_norm("KFAC", PAPER_LIKE_NORM)(records)
    try:
        updates = f" (U = {_updates(records)} minibatch means)"
    except LookupError:
        updates = ""
    remaining = math.log10(library / PAPER_KFAC_NORM)
    sizes = {int(r["config"]["method"]["library_batch_size"]) for r in records
             if "library_batch_size" in ((r.get("config") or {}).get("method") or {})}
    batch = (f", so minibatches of about {min(sizes) * math.sqrt(library / PAPER_KFAC_NORM):.3g}"
             f" instead of {min(sizes)} would match, which nothing we have measures"
             if len(sizes) == 1 else "")
    return (f"the library's sums give U^2 / N = {library / exact:.3g} times the exact norm "
            f"{_number(exact)}{updates}: {_number(library)}, "
            f"{remaining:+.2f} orders from 1.0985e9; no measured cause yet for the remaining "
            f"factor {10 ** abs(remaining):.3g} (untested: the authors' minibatch size and "
            f"label samples, MNIST binarisation, their own network; the norm scales as "
            f"1 / B^2{batch})")


def norm_comparison_cause(column: str, label: str):
    """Cause of a 'K-FAC's norm is far larger than Diag's and EKFAC's' anchor: the three
    norms of the records and, for the correctly scaled ones, what the same three norms
    accumulated as the DLR library does say (the hypothesis row)."""

    def cause(records: list[dict[str, Any]]) -> str:
        means = cell_means(records)
        text = (f"{label} last-layer norms from each structure's own records: "
                f"{_norms_text(means, column)}")
        if column == PAPER_LIKE_NORM:
            return text + "; no measured cause yet"
        try:
            orders = kfac_over_others(PAPER_LIKE_NORM)(records)
        except LookupError:
            return text + "; no measured cause yet: no paper-like norms in these records"
        holds = FAR_LARGER.classify(orders, None, (math.nan, math.nan)) == AGREES
        return (f"{text}; accumulated as the DLR library does: "
                f"{_norms_text(means, PAPER_LIKE_NORM)}, K-FAC's {orders:.2f} orders above "
                f"the larger of the other two: the hypothesis "
                f"{'reproduces' if holds else 'does not reproduce'} the paper's comparison")

    return cause
