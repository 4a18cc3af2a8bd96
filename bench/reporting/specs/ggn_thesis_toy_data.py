"""Report spec of the GGN thesis (Immer), Figure 5.1: the two toy data sets.

The thesis prints no number for the figure. The reproduction notes (sections 2.1, 2.2) print
checksums of the sets the companion code draws; each is an anchor judged by its printed digits,
so the report says whether our generators draw exactly the thesis's data.
"""

from __future__ import annotations

from bench.reporting.causes.ggn_thesis import MOONS, SNELSON, generator_cause
from bench.reporting.claims import cell_means
from bench.reporting.figures.toy_data_plots import toy_data_figure
from bench.reporting.spec import Anchor, ArtifactSpec

# (data set, cell column, what the notes call it, the printed checksum).
CHECKSUMS = (
    (SNELSON, "train/n", "training points", "150"),
    (SNELSON, "train/x1_min", "train x-range, low end", "0.12772"),
    (SNELSON, "train/x1_max", "train x-range, high end", "5.93156"),
    (SNELSON, "train/y_mean", "train y mean", "-0.16523"),
    (SNELSON, "train/y_sd", "train y population sd", "0.75728"),
    (SNELSON, "train/point1/x1", "first training pair, x", "5.33294"),
    (SNELSON, "train/point1/y", "first training pair, y", "-0.46074"),
    (SNELSON, "train/point2/x1", "second training pair, x", "4.90984"),
    (SNELSON, "train/point2/y", "second training pair, y", "-0.29981"),
    (SNELSON, "train/point3/x1", "third training pair, x", "0.30545"),
    (SNELSON, "train/point3/y", "third training pair, y", "-0.41404"),
    (SNELSON, "test/n", "test points", "1000"),
    (SNELSON, "test/point1/x1", "first test pair, x", "1.37039"),
    (SNELSON, "test/point1/y", "first test pair, y", "-2.12480"),
    (SNELSON, "test/y_mean", "test y mean", "-0.23778"),
    (MOONS, "train/n", "training points", "150"),
    (MOONS, "train/point1/x1", "first training point, x1", "1.24790"),
    (MOONS, "train/point1/x2", "first training point, x2", "-0.05287"),
    (MOONS, "train/positives", "training positives", "75"),
    (MOONS, "train/x1_mean", "training feature mean, x1", "0.51155"),
    (MOONS, "train/x2_mean", "training feature mean, x2", "0.26749"),
    (MOONS, "test/n", "test points", "1000"),
    (MOONS, "test/point1/x1", "first test point, x1", "0.77042"),
    (MOONS, "test/point1/x2", "first test point, x2", "0.40071"),
    (MOONS, "test/positives", "test positives", "500"),
)
TITLES = {SNELSON: "Snelson with a gap", MOONS: "two moons"}
SECTIONS = {SNELSON: "2.1", MOONS: "2.2"}


def cell(row: str, column: str):
    """Anchor getter: the mean of one cell over the ok records (LookupError: no record)."""

    def get(records: list[dict]) -> float:
        means = cell_means(records)
        if (row, column) not in means:
            raise LookupError(f"no record has {row} / {column}")
        return means[(row, column)]

    return get


def checksum_anchor(data: str, column: str, label: str, printed: str) -> Anchor:
    """One checksum of the notes as an anchor judged by its printed digits."""
    return Anchor(f"{TITLES[data]}: {label} (notes {SECTIONS[data]})", printed,
                  cell(data, column), cause=generator_cause(data))


FIGURE_5_1 = ArtifactSpec(
    paper="ggn_thesis",
    artifact="figure-5.1",
    title="Figure 5.1: the toy data sets, Snelson with a gap and two moons (N = 150 each)",
    paper_seed=None,
    ignore_targets=(("*", "*"),),
    figure=toy_data_figure,
    table_cells=(("*", "*/n"), ("*", "*/y_mean"), ("*", "*/y_sd"), ("*", "*/positives")),
    anchors=tuple(checksum_anchor(*checksum) for checksum in CHECKSUMS),
    notes=(
        "The thesis prints no number for Figure 5.1; the anchors are the checksums of the "
        "reproduction notes (sections 2.1 and 2.2: NumPy 2.x legacy RNG with SciPy 1.17; "
        "scikit-learn 1.9.1), judged by their printed digits. Agreement means the sets every "
        "other GGN-thesis figure trains on are the companion code's.",
        "Snelson with a gap: 10 n draws on the range of Snelson's inputs from a not-a-knot "
        "spline through the notes' 20 nodes plus N(0, 0.09) noise, points with 1.5 < x < 2.4 "
        "removed, the first n kept (train seed 6, n = 150; test seed 5, n = 1000). Two moons: "
        "make_moons, noise 0.3 (train random_state 6, n = 150; test 5, n = 1000).",
        "The sets are fixed by the data sets' own seeds: every scale runs the same two jobs "
        "(seconds). Cells: per split n, x ranges and means, y mean and population sd, "
        "positives (two moons), and the first three points in draw order; the tables show "
        "the sizes and target statistics, the CSV every cell.",
    ),
)

SPECS = [FIGURE_5_1]
