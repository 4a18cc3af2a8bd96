"""Figures 5.2-5.5 of the GGN thesis drawn from the records' arrays, and the model-selection
grid read back from those records (also used by the report's anchors)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from bench.reporting.aggregate import mean_and_ci  # noqa: E402
from bench.reporting.claims import Summary  # noqa: E402
from bench.reporting.intervals import LOG_PROBABILITY, Range, clip_band  # noqa: E402

GRID_METRICS = ("log_evidence", "train_ll", "test_ll")
# Ranges of the grid metrics of a classification grid (Figure 5.3): the mean log likelihood of
# binary labels is a log probability; the Laplace log evidence is an approximation, unbounded.
CLASSIFICATION_RANGES: dict[str, Range] = {"train_ll": LOG_PROBABILITY,
                                           "test_ll": LOG_PROBABILITY}
GRID_TITLES = {"log_evidence": "log marginal likelihood (Laplace-GGN)",
               "train_ll": "train log likelihood (mean)", "test_ll": "test log likelihood (mean)"}
POSTERIORS = ("VOGGN", "LGVA", "OGGN", "L-GGN")
# The thesis's four posteriors, then our sensitivity row (VOGGN with S = 10 Monte Carlo draws)
# and our oracle (pyro's reference Gaussian VI, the best ELBO it finds).
SENSITIVITY_ROWS = ("VOGGN-S10",)
ORACLE_ROWS = ("reference-VI",)
FIGURE_POSTERIORS = (*POSTERIORS, *SENSITIVITY_ROWS, *ORACLE_ROWS)
PROTOCOLS = ("paper", "corrected")
PREDICTIVE_ROWS = (("nn", "NN pred."), ("glm", "GLM pred."))


@dataclass(frozen=True)
class GridPoint:
    """One trained network of the model-selection grid (values averaged over seeds)."""

    noise_variance: float | None
    prior_precision: float
    log_evidence: float
    train_ll: float
    test_ll: float


def grid_points(records: list[dict[str, Any]]) -> list[GridPoint]:
    """Every (sigma^2, delta) of the records, each metric averaged over the seeds holding it;
    LookupError when there are none."""
    sums: dict[tuple, list[list[float]]] = {}
    for record in records:
        arrays = record.get("arrays", {})
        if "prior_precision" not in arrays:
            continue
        noise = record.get("fitted", {}).get("noise_variance")
        for b, delta in enumerate(arrays["prior_precision"]):
            key = (None if noise is None else round(float(noise), 12), round(float(delta), 12))
            values = [arrays[name][b] for name in GRID_METRICS]
            if any(v is None for v in values):
                continue
            sums.setdefault(key, []).append([float(v) for v in values])
    if not sums:
        raise LookupError("no model-selection grid in the records")
    points = []
    for (noise, delta), rows in sorted(sums.items(), key=lambda item: (item[0][0] or 0,
                                                                     item[0][1])):
        means = [sum(column) / len(column) for column in zip(*rows, strict=True)]
        points.append(GridPoint(noise, delta, *means))
    return points


def best_point(points: list[GridPoint], metric: str = "log_evidence") -> GridPoint:
    """The grid point maximising ``metric``."""
    return max(points, key=lambda point: getattr(point, metric))


def nearest_record_arrays(records: list[dict[str, Any]], prior_precision: float,
                          noise_variance: float | None) -> tuple[dict[str, Any], str]:
    """The arrays of the record holding the grid point nearest (in log) to the setting, and
    that point's ``delta=<value>`` prefix."""
    def log_distance(a: float, b: float) -> float:
        return abs(math.log10(a) - math.log10(b))

    best = None
    for record in records:
        arrays = record.get("arrays", {})
        noise = record.get("fitted", {}).get("noise_variance")
        if "prior_precision" not in arrays:
            continue
        noise_gap = 0.0 if noise_variance is None else log_distance(noise, noise_variance)
        for delta in arrays["prior_precision"]:
            score = noise_gap + log_distance(delta, prior_precision)
            if best is None or score < best[0]:
                best = (score, arrays, f"delta={delta:.3g}", noise)
    if best is None:
        raise LookupError("no model-selection grid in the records")
    return best[1], best[2]


def _example_settings(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    examples = records[0]["config"].get("examples") or {}
    return {label: dict(values) for label, values in examples.items()}


def regression_model_selection(records: list[dict[str, Any]], spec=None):
    """Figure 5.2: top, the three metrics over log10 delta x log10 sigma^2 (evidence optimum
    *, examples A and B); bottom, the GLM predictive at *, A and B: mean, +-2 sd of the
    function (dark) and of y (sigma^2 added, light), training data."""
    points = grid_points(records)
    deltas = sorted({p.prior_precision for p in points})
    noises = sorted({p.noise_variance for p in points})
    lookup = {(p.noise_variance, p.prior_precision): p for p in points}
    best = best_point(points)
    examples = {"*": {"prior_precision": best.prior_precision,
                      "noise_variance": best.noise_variance}, **_example_settings(records)}
    fig, axes = plt.subplots(2, 3, figsize=(12, 7))
    for ax, metric in zip(axes[0], GRID_METRICS, strict=True):
        surface = [[getattr(lookup[(n, d)], metric) if (n, d) in lookup else math.nan
                    for d in deltas] for n in noises]
        floor = sorted(v for row in surface for v in row if math.isfinite(v))
        low = floor[len(floor) // 5] if floor else 0.0
        image = ax.pcolormesh([math.log10(d) for d in deltas], [math.log10(n) for n in noises],
                              [[max(v, low) for v in row] for row in surface], shading="nearest",
                              cmap="viridis")
        fig.colorbar(image, ax=ax, fraction=0.046)
        for label, setting in examples.items():
            ax.annotate(label, (math.log10(setting["prior_precision"]),
                                math.log10(setting["noise_variance"])),
                        color="white" if label != "*" else "red", fontsize=11, ha="center",
                        va="center", weight="bold")
        ax.set_title(GRID_TITLES[metric], fontsize=9)
        ax.set_xlabel("log10 delta", fontsize=8)
        ax.set_ylabel("log10 sigma^2", fontsize=8)
    for ax, (label, setting) in zip(axes[1], examples.items(), strict=True):
        arrays, prefix = nearest_record_arrays(records, setting["prior_precision"],
                                               setting["noise_variance"])
        x, mean, sd = arrays["x_plot"], arrays[f"{prefix}/glm_mean"], arrays[f"{prefix}/glm_sd"]
        noise = float(setting["noise_variance"])
        total = [math.sqrt(s**2 + noise) for s in sd]
        ax.fill_between(x, [m - 2 * s for m, s in zip(mean, total, strict=True)],
                        [m + 2 * s for m, s in zip(mean, total, strict=True)],
                        color="tab:blue", alpha=0.15, linewidth=0)
        ax.fill_between(x, [m - 2 * s for m, s in zip(mean, sd, strict=True)],
                        [m + 2 * s for m, s in zip(mean, sd, strict=True)],
                        color="tab:blue", alpha=0.35, linewidth=0)
        ax.plot(x, mean, color="tab:blue", linewidth=1)
        ax.scatter(arrays["x_train"], arrays["y_train"], s=3, color="black")
        ax.set_ylim(-3, 2)
        ax.set_title(f"{label}: GLM predictive, {prefix}, sigma^2={noise:.3g}", fontsize=9)
    fig.tight_layout()
    return fig


def _contour(ax, arrays: dict[str, Any], values: list[float], shape: list[int], *,
             levels=None, cmap="RdBu_r", extend="neither"):
    """Filled contours of ``values`` over the record's 2-D plot grid, training points on top."""
    side = int(round(math.sqrt(shape[0])))
    xs = arrays["x_plot"][0::2]
    ys = arrays["x_plot"][1::2]
    grid_x = [xs[i * side:(i + 1) * side] for i in range(side)]
    grid_y = [ys[i * side:(i + 1) * side] for i in range(side)]
    grid_v = [values[i * side:(i + 1) * side] for i in range(side)]
    image = ax.contourf(grid_x, grid_y, grid_v, levels=levels if levels is not None else 10,
                        cmap=cmap, extend=extend)
    train = arrays["x_train"]
    labels = arrays["y_train"]
    ax.scatter(train[0::2], train[1::2], c=["black" if y > 0.5 else "white" for y in labels],
               edgecolors="grey", s=6, linewidths=0.3)
    ax.set_xticks([])
    ax.set_yticks([])
    return image


PROBABILITY_LEVELS = [i / 10 for i in range(11)]
# Colour limits of an uncertainty map: these percentiles of its values, so that a thin line
# of extreme values (a ridge of the decision boundary) cannot set the scale of the map.
ROBUST_PERCENTILES = (2.0, 98.0)


def log10_map(values: list[float | None]) -> list[float]:
    """``log10`` of a map's values (NaN, left blank, where a value is missing or not
    positive): the sd maps span many decades (``Lambda = s (1 - s)`` decays exponentially
    away from the decision boundary)."""
    return [math.log10(v) if v is not None and v > 0 else math.nan for v in values]


def robust_levels(values: list[float | None], n_levels: int = 10) -> list[float]:
    """``n_levels + 1`` contour levels evenly spanning the :data:`ROBUST_PERCENTILES` of the
    finite ``values`` (drawn with ``extend="both"``: values beyond them take the end
    colours)."""
    finite = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if finite.size == 0:
        return [0.0, 1.0]
    low, high = np.percentile(finite, ROBUST_PERCENTILES)
    if not high > low:
        high = low + max(abs(low), 1.0) * 1e-6
    return [float(v) for v in np.linspace(low, high, n_levels + 1)]


@dataclass(frozen=True)
class SeedCurve:
    """One metric over the delta grid of a one-row grid (Figure 5.3): each seed's values and,
    per delta, their mean with its 95% Student-t band (:func:`mean_and_ci`; NaN bounds with
    one seed)."""

    prior_precision: list[float]
    per_seed: dict[int, list[float]]
    summaries: list[Summary]

    def band(self, bounds: Range | None = None) -> tuple[list[float], list[float]]:
        """Lower and upper ends of the band (the mean where it has none), cut at the metric's
        range ``bounds`` (None: unbounded)."""
        ends = [(s.low, s.high) if math.isfinite(s.low) else (s.mean, s.mean)
                for s in self.summaries]
        return clip_band([low for low, _ in ends], [high for _, high in ends], bounds)


def seed_curve(records: list[dict[str, Any]], metric: str) -> SeedCurve:
    """``metric`` over delta from the records' arrays, one curve per seed and their mean;
    LookupError when no record holds the grid."""
    per_delta: dict[float, list[float]] = {}
    per_seed: dict[int, list[float]] = {}
    for record in sorted(records, key=lambda r: r["seed"]):
        arrays = record.get("arrays", {})
        if "prior_precision" not in arrays or metric not in arrays:
            continue
        values = [math.nan if v is None else float(v) for v in arrays[metric]]
        per_seed[int(record["seed"])] = values
        for delta, value in zip(arrays["prior_precision"], values, strict=True):
            per_delta.setdefault(round(float(delta), 12), []).append(value)
    if not per_delta:
        raise LookupError(f"no {metric} over the delta grid in the records")
    deltas = sorted(per_delta)
    summaries = []
    for delta in deltas:
        mean, _, low, high = mean_and_ci(per_delta[delta])
        summaries.append(Summary(mean, low, high, sum(math.isfinite(v)
                                                      for v in per_delta[delta])))
    return SeedCurve(deltas, per_seed, summaries)


def classification_model_selection(records: list[dict[str, Any]], spec=None):
    """Figure 5.3: top, the three metrics over delta, the mean over seeds with its 95% band
    (the log likelihoods' cut at 0) and each seed's curve (evidence optimum of the mean *, A,
    B); bottom, the GLM predictive probability at *, A and B of the smallest seed with the
    training points."""
    records = sorted(records, key=lambda r: r["seed"])
    best = best_point(grid_points(records))
    examples = {"*": {"prior_precision": best.prior_precision}, **_example_settings(records)}
    fig, axes = plt.subplots(2, 3, figsize=(12, 7))
    for ax, metric in zip(axes[0], GRID_METRICS, strict=True):
        curve = seed_curve(records, metric)
        for values in curve.per_seed.values():
            ax.plot(curve.prior_precision, values, color="grey", linewidth=0.6, alpha=0.7)
        ax.plot(curve.prior_precision, [s.mean for s in curve.summaries], marker="o",
                markersize=3, color="tab:blue")
        ax.fill_between(curve.prior_precision, *curve.band(CLASSIFICATION_RANGES.get(metric)),
                        color="tab:blue", alpha=0.2, linewidth=0)
        ax.set_xscale("log")
        for label, setting in examples.items():
            ax.axvline(setting["prior_precision"], color="red" if label == "*" else "grey",
                       linewidth=0.8, linestyle="--")
            ax.text(setting["prior_precision"], 0.97, f" {label}", fontsize=9, va="top",
                    transform=ax.get_xaxis_transform())
        ax.set_title(GRID_TITLES[metric], fontsize=9)
        ax.set_xlabel("prior precision delta", fontsize=8)
        ax.tick_params(labelsize=7)
    seeds = list(seed_curve(records, "log_evidence").per_seed)
    fig.suptitle(f"mean over seeds {', '.join(map(str, seeds))} with 95% band (log likelihoods' "
                 "cut at 0); grey: each seed", fontsize=9)
    for ax, (label, setting) in zip(axes[1], examples.items(), strict=True):
        arrays, prefix = nearest_record_arrays(records, setting["prior_precision"], None)
        shape = records[0]["fitted"]["plot_shape"]
        image = _contour(ax, arrays, arrays[f"{prefix}/glm_probability"], shape,
                         levels=PROBABILITY_LEVELS)
        ax.set_title(f"{label}: GLM predictive mean, {prefix}, seed {seeds[0]}", fontsize=9)
    fig.subplots_adjust(hspace=0.35, right=0.9)
    fig.colorbar(image, ax=axes[1].tolist(), fraction=0.02)
    return fig


def _protocol_posterior_records(records: list[dict[str, Any]]
                                ) -> dict[str, dict[str, dict[str, Any]]]:
    """Per protocol (paper first), the smallest seed's record of each posterior."""
    chosen: dict[str, dict[str, dict[str, Any]]] = {}
    order = {name: k for k, name in enumerate(PROTOCOLS)}
    for record in sorted(records, key=lambda r: (order.get(r.get("protocol"), len(order)),
                                                 r["seed"])):
        chosen.setdefault(str(record.get("protocol")), {}).setdefault(
            str(record["config"].get("posterior")), record)
    return chosen or {"paper": {}}


def _predictive_panels(by_protocol: dict, axes, array: str):
    """Title every NN / GLM panel (two rows per protocol, a column per posterior), mark those
    whose record lacks ``<kind>/<array>`` missing, and yield ``(ax, record, kind)`` for the
    rest."""
    for block, (protocol, chosen) in enumerate(by_protocol.items()):
        for column, posterior in enumerate(FIGURE_POSTERIORS):
            record = chosen.get(posterior)
            for offset, (kind, label) in enumerate(PREDICTIVE_ROWS):
                ax = axes[2 * block + offset, column]
                ax.set_title(f"{posterior}: {label} [{protocol}]", fontsize=9)
                if record is None or f"{kind}/{array}" not in record["arrays"]:
                    _missing(ax)
                    continue
                yield ax, record, kind


def _missing(ax) -> None:
    ax.text(0.5, 0.5, "missing", ha="center", transform=ax.transAxes)


def regression_predictives(records: list[dict[str, Any]], spec=None):
    """Figure 5.4: per protocol the rows NN / GLM predictive, columns VOGGN, LGVA, OGGN,
    L-GGN, VOGGN with S = 10 and the reference VI; mean +- 2 sd of the function (sigma^2
    not added, notes 7.4) and three joint samples; x in [0, 6]."""
    by_protocol = _protocol_posterior_records(records)
    n_rows = 2 * len(by_protocol)
    fig, axes = plt.subplots(n_rows, len(FIGURE_POSTERIORS), figsize=(19, 2.75 * n_rows),
                             sharex=True, sharey=True, squeeze=False)
    for ax, record, kind in _predictive_panels(by_protocol, axes, "mean"):
        _regression_panel(ax, record["arrays"], kind)
    fig.suptitle("Snelson with a gap: mean +- 2 sd (function space) and three joint samples; "
                 "protocol in brackets", fontsize=9)
    fig.tight_layout()
    return fig


def _regression_panel(ax, arrays: dict[str, Any], kind: str) -> None:
    x, mean, sd = arrays["x_plot"], arrays[f"{kind}/mean"], arrays[f"{kind}/sd"]
    ax.fill_between(x, [m - 2 * s for m, s in zip(mean, sd, strict=True)],
                    [m + 2 * s for m, s in zip(mean, sd, strict=True)],
                    color="tab:blue", alpha=0.25, linewidth=0)
    ax.plot(x, mean, color="tab:blue", linewidth=1)
    for s in range(3):
        if f"{kind}/sample_{s}" in arrays:
            ax.plot(x, arrays[f"{kind}/sample_{s}"], color="tab:orange", linewidth=0.6,
                    alpha=0.8)
    ax.scatter(arrays["x_train"], arrays["y_train"], s=2, color="black")
    ax.set_xlim(0, 6)
    ax.set_ylim(-3, 2)


def classification_predictives(records: list[dict[str, Any]], spec=None):
    """Figure 5.5: per protocol (a) the rows NN / GLM predictive mean, columns VOGGN, LGVA,
    OGGN, L-GGN and VOGGN with S = 10; (b) the L-GGN posterior's BLR model sd
    ``sqrt(Lambda J Sigma J^T Lambda)`` and noise sd ``sqrt(Lambda)`` on a log10 scale (colour
    limits at the 2nd and 98th percentiles of the log values)."""
    by_protocol = _protocol_posterior_records(records)
    n_rows = 2 * len(by_protocol)
    fig, axes = plt.subplots(n_rows, len(FIGURE_POSTERIORS) + 1, figsize=(21, 3 * n_rows),
                             squeeze=False)
    image = None
    for ax, record, kind in _predictive_panels(by_protocol, axes, "probability"):
        image = _contour(ax, record["arrays"], record["arrays"][f"{kind}/probability"],
                         record["fitted"]["plot_shape"], levels=PROBABILITY_LEVELS)
    for block, (protocol, chosen) in enumerate(by_protocol.items()):
        laplace = chosen.get("L-GGN")
        for offset, (name, title) in enumerate((("blr/model_sd", "log10 L-GGN model sd"),
                                                ("blr/noise_sd",
                                                 "log10 noise sd sqrt(Lambda)"))):
            ax = axes[2 * block + offset, len(FIGURE_POSTERIORS)]
            ax.set_title(f"{title} [{protocol}]", fontsize=9)
            if laplace is None or name not in laplace["arrays"]:
                _missing(ax)
                continue
            values = log10_map(laplace["arrays"][name])
            sd_image = _contour(ax, laplace["arrays"], values, laplace["fitted"]["plot_shape"],
                                cmap="viridis", levels=robust_levels(values), extend="both")
            fig.colorbar(sd_image, ax=ax, fraction=0.046)
    if image is not None:
        fig.colorbar(image, ax=axes[:, :len(FIGURE_POSTERIORS)].ravel().tolist(),
                     fraction=0.015)
    return fig
