"""Causes of the Laplace Redux reports (:mod:`bench.reporting.specs.laplace_redux` and the
``laplace_redux_*`` specs), computed from the records.

Tables 3 and 4, Figure 9: our SWAG and MAP beside the paper's for the swap hypothesis, the
rows where FMNIST is not the easiest OOD set, the shift levels where a method is above MAP
with the seed-paired spread of the gap, and the side runs beside BBB and CSGHMC. Table 2: why
a FULL row or a prediction time is not comparable, and what the budget side runs measure on
DIAG. The MAP-recipe study: each recipe's MAP cells beside the paper's, on the mean and seed
by seed; its selection rule: the tier that chose and why. Figure 8: where a statement about
the variant grid fails, and when its tolerances lie below the noise of the test sets. The row
names, side-run seeds and tolerances these causes share with the specs are defined here.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from omegaconf import OmegaConf

from bench.harness.overrides import CONF_DIR
from bench.reporting.claims import Means, cell_means
from bench.reporting.figures.dataset_shift_plots import shift_curve
from bench.reporting.figures.variant_grid_plots import BROKEN_ECE, VariantRow, is_broken, parse_row
from bench.reporting.side_runs import seed_value, side_run_cause
from bench.reporting.targets import paper_values

# The paper's methods in its tables' order (Tables 2-4, Figure 9; the figures read it too).
ROWS = ("MAP", "DE", "BBB", "CSGHMC", "SWAG", "LA", "LA*")


def swag_against_map(metric: str):
    """Anchor cause: our SWAG and MAP FMNIST ``metric`` beside the paper's, from the records
    (SWAG starts from our MAP network, so a MAP gap carries over)."""

    def cause(records: list[dict[str, Any]]) -> str:
        means = cell_means(records)
        column = f"{metric}_fmnist"
        if ("SWAG", column) not in means or ("MAP", column) not in means:
            raise LookupError(f"no SWAG or MAP {column} cell")
        paper = {key: value.value for key, value in
                 paper_values("laplace_redux", ("table-3",)).items()}
        return (f"measured in these records: SWAG FMNIST {metric} {means[('SWAG', column)]:.1f}"
                f" (paper SWAG FMNIST {paper[('SWAG', column)]:.1f}, EMNIST "
                f"{paper[('SWAG', f'{metric}_emnist')]:.1f}); SWAG starts from our MAP, whose "
                f"FMNIST {metric} is {means[('MAP', column)]:.1f} against the paper's "
                f"{paper[('MAP', column)]:.1f} (MAP recipes: laplace_redux/map-recipe); "
                "without EMNIST the swap cannot be tested on its other half")

    return cause


def rows_where_fmnist_is_not_easiest(swag: bool):
    """Anchor cause: each row (SWAG alone or every other) and comparison in which FMNIST is
    not the easiest OOD set, with both means from the records."""

    def cause(records: list[dict[str, Any]]) -> str:
        means = cell_means(records)
        failing = []
        for row in sorted({row for row, column in means if column == "conf_fmnist"}):
            if row not in ROWS or (row == "SWAG") != swag:
                continue
            for other in ("emnist", "kmnist"):
                for metric, better in (("conf", min), ("auroc", max)):
                    ours, theirs = (means.get((row, f"{metric}_{s}")) for s in ("fmnist", other))
                    if ours is None or theirs is None:
                        continue
                    if better(ours, theirs) != ours:
                        failing.append(f"{row} {metric} FMNIST {ours:.1f} vs {other.upper()} "
                                       f"{theirs:.1f}")
        if not failing:
            raise LookupError("FMNIST is the easiest set everywhere")
        return ("measured in these records, where FMNIST is not the easiest: "
                + "; ".join(failing) + " (EMNIST not run: needs data)")

    return cause


# Side runs (laplace_redux/table-3-side-runs), model seed 6, one factor each: their rows and
# what the BBB / CSGHMC causes quote from them.
SIDE_RUN_SEED = 6
BBB_KL_SUM, CSGHMC_CODE_COUNTER = "BBB (KL summed)", "CSGHMC (code's step counter)"


def bbb_cause(column: str):
    """BBB's cause for ``column``: the KL-summed side run beside BBB on model seed 6."""
    return side_run_cause(
        "BBB", column, {"with the KL summed over the weights": BBB_KL_SUM}, SIDE_RUN_SEED,
        "as run (bayesian-torch 0.5's KL, a mean per weight tensor; before 2021-07-14 the "
        "library summed it)", "Mixed precision (the code's autocast) is unmeasured")


def csghmc_cause(column: str):
    """CSGHMC's cause for ``column``: the code's-counter side run beside CSGHMC on seed 6."""
    return side_run_cause(
        "CSGHMC", column, {"with the code's step-size counter": CSGHMC_CODE_COUNTER},
        SIDE_RUN_SEED, "as run (a smooth cosine per step)",
        "Other differences from the code are unmeasured")


def paired_spread(gap: float, paired: list[float]) -> str:
    """Where a mean gap lies against the standard error of its seed-paired differences:
    inside the seed spread within 2 SE, outside beyond it; one seed has no SE to judge by."""
    if len(paired) < 2:
        return "1 seed: no paired SE"
    se = statistics.stdev(paired) / math.sqrt(len(paired))
    where = "inside" if gap <= 2 * se else "outside"
    ratio = f"{gap / se:.1f} SE" if se > 0 else "SE 0"
    return f"paired SE {se:.4f}, {len(paired)} seeds: {ratio}, {where} the seed spread"


def levels_worse_than_map(row: str, metric: str, from_level: float):
    """Anchor cause: each level >= ``from_level`` where ``row``'s mean ``metric`` is above
    MAP's (the levels the claim counts against), with the mean gap and the standard error of
    the gap paired by seed (``row`` minus MAP in the same job seed), so the reader sees whether
    the failing level is inside the seed spread (LookupError when no level fails)."""

    def cause(records: list[dict[str, Any]]) -> str:
        by_seed: dict[tuple[str, float], dict[int, float]] = {}
        for record in records:
            cells = {(c["row"], c["column"]): c["value"] for c in record.get("cells") or []}
            for name in (row, "MAP"):
                for level, value in shift_curve(cells, name, metric):
                    by_seed.setdefault((name, level), {})[record["seed"]] = value
        failing = []
        for (name, level), values in sorted(by_seed.items()):
            theirs = by_seed.get(("MAP", level), {})
            if name != row or level < from_level or not theirs:
                continue
            gap = statistics.fmean(values.values()) - statistics.fmean(theirs.values())
            if gap <= 0:
                continue
            paired = [values[seed] - theirs[seed] for seed in sorted(set(values) & set(theirs))]
            failing.append(f"{level:g}: +{gap:.4f} ({paired_spread(gap, paired)})")
        if not failing:
            raise LookupError(f"{row} is not above MAP at any level")
        return f"measured in these records: {row}'s {metric} above MAP's at " + "; ".join(failing)

    return cause


ALL_WEIGHTS_FULL = "FullLaplace"
# The side runs' budgets (conf/marglik_budget/): name -> label, and the seed they repeat.
BUDGETS = {path.stem: str(OmegaConf.load(path).label)
           for path in sorted((CONF_DIR / "marglik_budget").glob("*.yaml"))}
BUDGET_SEED = 711
BUDGET_BASELINE = "50 epochs, 5k refits"


def budget_row(label: str) -> str:
    """The side run's row: Table 2's DIAG row under the budget ``label``."""
    return f"LA/DIAG ({label})"


def full_classes(records: list[dict[str, Any]]) -> list[str]:
    """The laplace-torch classes the LA/FULL records were fitted with
    (``fitted.methods.LA/FULL.laplace_class``), sorted."""
    return sorted({str(((r.get("fitted") or {}).get("methods") or {}).get("LA/FULL", {})
                        .get("laplace_class")) for r in records if r.get("method") == "LA/FULL"})


def stand_in_reason(records: list[dict[str, Any]]) -> str:
    """Why the FULL row is not the paper's, quoting the records' laplace-torch class; "" when
    every LA/FULL record is the all-weights FULL (or there is none)."""
    stand_ins = [name for name in full_classes(records) if name != ALL_WEIGHTS_FULL]
    if not stand_ins:
        return ""
    return (f"last-layer stand-in: the LA/FULL records are {', '.join(stand_ins)} "
            "(fitted.methods.LA/FULL.laplace_class), a full GGN over the last layer's 850 "
            "weights trained with the other weights at delta_0 = 30, not the paper's "
            f"all-weights FULL ({ALL_WEIGHTS_FULL}; notes), which is the paper-scale GPU job")


def seconds_reason(records: list[dict[str, Any]]) -> str:
    """Why our prediction seconds are not the paper's, quoting the records' device and set
    sizes (``device``, ``fitted.set_sizes``)."""
    devices = sorted({str(r.get("device", "unknown device")) for r in records}) or ["unknown"]
    sizes = sorted({int(n) for r in records
                    for n in ((r.get("fitted") or {}).get("set_sizes") or {}).values()})
    on_sets = (f"sets of {', '.join(f'{n:,}' for n in sizes)} images" if sizes
               else "the scale's sets")
    return (f"hardware-specific: ours are {'/'.join(devices)} seconds on {on_sets} (records' "
            "device and fitted.set_sizes), the paper's GPU seconds on sets of 8k-40k images; "
            "the within-seed ratios are the anchors, judged on CUDA records only")


def sibling_budget_cause(column: str) -> Callable[[list[dict[str, Any]]], str]:
    """Cause of a KFAC / FULL cell the side runs do not test: how far the budget side runs move
    the DIAG row's ``column`` on seed 711, the same training loop with another structure
    (LookupError without them)."""

    def cause(records: list[dict[str, Any]]) -> str:
        base = seed_value(records, "LA/DIAG", column, BUDGET_SEED)
        moves = []
        for label in BUDGETS.values():
            try:
                moved = seed_value(records, budget_row(label), column, BUDGET_SEED)
            except LookupError:
                continue
            moves.append(f"{label} moves it {moved - base:+.3g}")
        if not moves:
            raise LookupError("no budget side run")
        return (f"no side run of this row; on DIAG (the same training loop, seed "
                f"{BUDGET_SEED}; sensitivity rows below) {column} is {base:.4g} at the cpu budget "
                f"and {'; '.join(moves)}")

    return cause


def budget_cause(column: str) -> Callable[[list[dict[str, Any]]], str]:
    """Cause of a DIAG cell: the side runs' values of ``column`` beside the seed-711 DIAG
    record's (LookupError when the records hold no side run or no seed-711 DIAG)."""
    return side_run_cause(
        "LA/DIAG", column, {label: budget_row(label) for label in BUDGETS.values()},
        BUDGET_SEED, f"at the cpu budget ({BUDGET_BASELINE})",
        "What is left (250 epochs and refits on 60k together, the 2k test sets) is unmeasured")


# The Table 3 cells judged, with the verdict tolerance of each (MEAN_RULES: confidence within
# 2 points, AUROC within 1 point).
JUDGED = {"conf_fmnist": 2.0, "conf_kmnist": 2.0, "auroc_fmnist": 1.0, "auroc_kmnist": 1.0}
# The paper's MAP row (appendix C.2.2, Table 3), FMNIST and KMNIST columns.
PAPER_MAP = {column: paper_values("laplace_redux", ("table-3",))[("MAP", column)].value
             for column in JUDGED}


def row_name(recipe: str, row: str) -> str:
    """A study row: the Table 3 ``row`` on the MAP network of ``recipe``."""
    return f"{recipe} / {row}"


def recipe_outcome(recipe: str):
    """Anchor cause: the recipe's MAP accuracy and judged cells beside the paper's, from the
    records (a recipe that does not train shows chance accuracy)."""

    def cause(records: list[dict[str, Any]]) -> str:
        means = cell_means(records)
        row = row_name(recipe, "MAP")
        if (row, "acc_mnist") not in means:
            raise LookupError(f"no {row} cells")
        cells = ", ".join(f"{column} {means[(row, column)]:.1f} (paper {PAPER_MAP[column]})"
                          for column in JUDGED if (row, column) in means)
        return (f"measured: {row} test accuracy {means[(row, 'acc_mnist')]:.1f}%, {cells}; "
                "the training objective per epoch is in the stored network's history.json")

    return cause


def per_seed_outcome(recipe: str) -> Callable[[list[dict[str, Any]]], str]:
    """Anchor cause: the recipe's judged MAP cells seed by seed, from the records."""
    row = row_name(recipe, "MAP")

    def cause(records: list[dict[str, Any]]) -> str:
        parts = []
        for seed in sorted({record["seed"] for record in records}):
            means = cell_means([r for r in records if r["seed"] == seed])
            cells = ", ".join(f"{column} {means[(row, column)]:.1f}" for column in JUDGED
                              if (row, column) in means)
            if cells:
                parts.append(f"seed {seed}: {cells}")
        if not parts:
            raise LookupError(f"no {row} cells")
        paper = ", ".join(f"{column} {value}" for column, value in PAPER_MAP.items())
        return f"measured per seed: {'; '.join(parts)} (paper: {paper})"

    return cause


def choice_cause(records: list[dict[str, Any]]) -> str:
    """The rule's choice and, tier by tier, why it decided or did not (from the records)."""
    by_seed = {}
    for record in records:
        choice = record.get("fitted", {}).get("choice")
        if choice is not None:
            by_seed[record["seed"]] = choice
    if not by_seed:
        raise LookupError("no selection record holds a choice")
    return " | ".join(f"seed {seed}: chosen {choice['chosen']} by the {choice['tier']} tier; "
                      + "; ".join(choice["reasons"]) for seed, choice in sorted(by_seed.items()))


# Within this many AUROC points of the best counts as on par (the paper reads its figure by
# eye; one point is about its seed-level spread in Table 4).
AUROC_TOLERANCE = 1.0
ACCURACY_TOLERANCE = 1.0
# The test sets the paper reads Figure 8 on (MNIST / FMNIST / KMNIST: 10,000 images each).
FULL_TEST_SET = 10_000


def auroc_standard_error(auroc: float, n_positive: int, n_negative: int) -> float:
    """Hanley and McNeil's standard error of an AUROC (as a fraction) from its two sets."""
    q1, q2 = auroc / (2 - auroc), 2 * auroc**2 / (1 + auroc)
    return math.sqrt((auroc * (1 - auroc) + (n_positive - 1) * (q1 - auroc**2)
                      + (n_negative - 1) * (q2 - auroc**2)) / (n_positive * n_negative))


def tolerance_noise_reason(records: list[dict[str, Any]]) -> str:
    """Why an anchor judged at ACCURACY_TOLERANCE / AUROC_TOLERANCE points is not judged
    here: the standard error of a difference of two variants' accuracies (binomial) or AUROCs
    (Hanley-McNeil) at the records' test-set size, from the largest such error over the
    variants' mean values, is above half the tolerance (a difference within the tolerance is
    not resolved); "" when it is not."""
    sizes = {int(((r.get("config") or {}).get("dataset") or {}).get("n_test")
                 or FULL_TEST_SET) for r in records}
    try:
        means = cell_means(records)
    except LookupError:
        return ""  # no cells: the anchor is missing, nothing to judge
    n = min(sizes)
    accuracy_se = max(math.sqrt(2 * (a / 100) * (1 - a / 100) / n) * 100
                      for (_, column), a in means.items() if column == "acc")
    auroc_se = max(math.sqrt(2) * auroc_standard_error(a / 100, n, n) * 100
                   for (_, column), a in means.items() if column == "auroc")
    if 2 * accuracy_se <= ACCURACY_TOLERANCE and 2 * auroc_se <= AUROC_TOLERANCE:
        return ""
    seeds = len({r.get("seed") for r in records})
    return (f"tolerance below the noise: at {n:,} test images per set and {seeds} seed(s) the "
            f"standard error of a difference of two variants is up to {accuracy_se:.2f} "
            f"accuracy points and {auroc_se:.2f} AUROC points, so the {ACCURACY_TOLERANCE:g}-"
            "point tolerances do not resolve it (judged at two standard errors within the "
            "tolerance; the paper scale reads the 10,000-image test sets)")


def all_variants(means: Means) -> dict[VariantRow, dict[str, float]]:
    """Parsed variant row -> its mean cells."""
    found: dict[VariantRow, dict[str, float]] = defaultdict(dict)
    for (row, column), value in means.items():
        parsed = parse_row(row)
        if parsed is not None:
            found[parsed][column] = value
    if not found:
        raise LookupError("no variant rows")
    return found


def variants(means: Means) -> dict[VariantRow, dict[str, float]]:
    """The contenders every anchor compares: :func:`all_variants` without the broken ones."""
    return {row: cells for row, cells in all_variants(means).items() if not is_broken(cells)}


def broken_variants(means: Means) -> list[str]:
    """The variants the anchors leave out, with the cells that show why."""
    return [f"{row.panel} / {_label(row)} (corrected ECE {cells['ece_corrected']:.1f}, mean "
            f"confidence {cells.get('conf', float('nan')):.1f}, accuracy "
            f"{cells.get('acc', float('nan')):.1f})"
            for row, cells in sorted(all_variants(means).items(), key=lambda item: str(item[0]))
            if is_broken(cells)]


ORACLE = ("measured on these records (the variants are laplace-torch's, the library oracle, on "
          "this report's data); where the statement fails: ")


def failures_cause(failures: Callable[[Means], list[str]]) -> Callable[[list[dict]], str]:
    """Anchor cause quoting the records' numbers where a statement fails (``failures`` lists
    them, most telling first; at most six are quoted)."""

    def cause(records: list[dict]) -> str:
        means = cell_means(records)
        found = failures(means)
        if not found:
            raise LookupError("the statement holds everywhere")
        more = f"; and {len(found) - 6} more" if len(found) > 6 else ""
        broken = broken_variants(means)
        left_out = (f". Left out as broken predictives (corrected ECE > {BROKEN_ECE:g} %): "
                    + "; ".join(broken) if broken else "")
        return ORACLE + "; ".join(found[:6]) + more + left_out

    return cause


def _label(row: VariantRow) -> str:
    return f"{row.subset} {row.structure} {row.hyper} {row.link}"


def kfac_failures(means: Means) -> list[str]:
    """Groups where KFAC is neither within the AUROC tolerance of the best structure nor
    faster than the slowest."""
    groups: dict[tuple, dict[str, dict[str, float]]] = defaultdict(dict)
    for row, cells in variants(means).items():
        if "auroc" in cells and "fit_s" in cells:
            groups[(row.panel, row.subset, row.hyper, row.link)][row.structure] = cells
    found = []
    for (panel, subset, hyper, link), structures in groups.items():
        if "kron" not in structures:
            continue
        kron = structures["kron"]
        best = max(structures, key=lambda name: structures[name]["auroc"])
        if kron["auroc"] < structures[best]["auroc"] - AUROC_TOLERANCE:
            found.append(f"{panel}, {subset} {hyper} {link}: kron AUROC {kron['auroc']:.1f} vs "
                         f"{best} {structures[best]['auroc']:.1f}")
    return found


def default_failures(means: Means) -> list[str]:
    """Panels where the default is more than the tolerances below the best variant."""
    by_panel: dict[str, list[tuple[VariantRow, dict[str, float]]]] = defaultdict(list)
    for row, cells in variants(means).items():
        if "auroc" in cells and "acc" in cells:
            by_panel[row.panel].append((row, cells))
    found = []
    for panel, rows in by_panel.items():
        default = [cells for row, cells in rows if row.is_default]
        if not default:
            continue
        top_auroc = max(rows, key=lambda item: item[1]["auroc"])
        top_acc = max(rows, key=lambda item: item[1]["acc"])
        if (default[0]["auroc"] < top_auroc[1]["auroc"] - AUROC_TOLERANCE
                or default[0]["acc"] < top_acc[1]["acc"] - ACCURACY_TOLERANCE):
            found.append(f"{panel}: default AUROC {default[0]['auroc']:.1f} / acc "
                         f"{default[0]['acc']:.1f} vs best AUROC {top_auroc[1]['auroc']:.1f} "
                         f"({_label(top_auroc[0])}) / acc {top_acc[1]['acc']:.1f} "
                         f"({_label(top_acc[0])})")
    return found


def link_failures(column: str, worse: Callable[[float, float], bool],
                  digits: int) -> Callable[[Means], list[str]]:
    """Fitted posteriors where probit's ``column`` is ``worse`` than MC's."""

    def failures(means: Means) -> list[str]:
        groups: dict[tuple, dict[str, dict[str, float]]] = defaultdict(dict)
        for row, cells in variants(means).items():
            groups[(row.panel, row.subset, row.structure, row.hyper)][row.link] = cells
        return [f"{panel}, {subset} {structure} {hyper}: probit {column} "
                f"{links['probit'][column]:.{digits}f} vs MC {links['mc'][column]:.{digits}f}"
                for (panel, subset, structure, hyper), links in groups.items()
                if "probit" in links and "mc" in links and column in links["probit"]
                and worse(links["probit"][column], links["mc"][column])]

    return failures


def timing_failures(means: Means) -> list[str]:
    """Last-layer posteriors whose MC prediction is not slower than probit's."""
    groups: dict[tuple, dict[str, dict[str, float]]] = defaultdict(dict)
    for row, cells in variants(means).items():
        if row.subset == "LL":
            groups[(row.panel, row.structure, row.hyper)][row.link] = cells
    return [f"{panel}, LL {structure} {hyper}: MC {links['mc']['predict_s']:.2f} s vs probit "
            f"{links['probit']['predict_s']:.2f} s"
            for (panel, structure, hyper), links in groups.items()
            if "mc" in links and "probit" in links
            and links["mc"]["predict_s"] <= links["probit"]["predict_s"]]
