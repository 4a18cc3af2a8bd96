"""Report specs of the GGN thesis (Immer), Chapter 5: Figure 5.6 (GP view on MNIST 4 vs 9).

The thesis prints one number for Figure 5.6 (|a_i| <= 0.2) and the setup (N, P, delta, the
layer counts); those are the table's cells. Its statements about the figure (perfect training
accuracy, misclassified test images aligned with boundary points of the other class) and the
self-check of reproduction notes section 6 are anchors computed from the records.
"""

from __future__ import annotations

from bench.reporting.causes.ggn_thesis import (
    SELF_CHECK_CAUSE,
    Records,
    max_residual_measured,
    misclassified_training_images,
    rank1_neighbours,
    records_by_seed,
    self_check_measured,
)
from bench.reporting.claims import ClaimRule
from bench.reporting.figures.gp_view_plots import gp_view_figure
from bench.reporting.spec import Anchor, ArtifactSpec, DataNeed
from bench.reporting.verdicts import Interval
from bench.tasks.gp_explanations import CHECK_ROW, ROW

# Importances |a_i| below this are ranked as ties at 0 (the image's own label at probability
# >= 0.99: a fitted point, not a boundary point), so a percentile among near-zero residues
# (0.001 against 0.0005) cannot call an image a boundary point.
BOUNDARY_IMPORTANCE_FLOOR = 0.01


def metric_mean(name: str):
    """Anchor getter: mean over the ok records holding ``metrics[name]``."""

    def get(records: list[dict]) -> float:
        values = [float(r["metrics"][name]) for r in records if name in r.get("metrics", {})]
        if not values:
            raise LookupError(f"no record has {name}")
        return sum(values) / len(values)

    return get


def resolved_percentile(value: float, magnitudes: list[float]) -> float:
    """Mid-rank percentile of ``|value|`` among ``magnitudes`` with every magnitude below
    :data:`BOUNDARY_IMPORTANCE_FLOOR` (``value`` included) counted as a tie at 0."""
    def level(a: float) -> float:
        return abs(a) if abs(a) >= BOUNDARY_IMPORTANCE_FLOOR else 0.0

    q = level(value)
    below = sum(level(m) < q for m in magnitudes)
    tied = sum(level(m) == q for m in magnitudes)
    return (below + 0.5 * tied) / len(magnitudes)


def boundary_percentile(records: Records) -> float:
    """Anchor getter: over the seeds' misclassified test images the records explain, the mean
    percentile (:func:`resolved_percentile`) of their rank-1 training image's |a_i| among the
    training images' |a_i|."""
    needed = ("importances_sorted", "tests/misclassified", "neighbours/importance")
    percentiles = []
    for record in records_by_seed(records, needed):
        arrays = record["arrays"]
        k = int(arrays["neighbours/count"][0])
        magnitudes = [abs(a) for a in arrays["importances_sorted"]]
        percentiles += [resolved_percentile(arrays["neighbours/importance"][row * k],
                                            magnitudes)
                        for row, wrong in enumerate(arrays["tests/misclassified"]) if wrong]
    if not percentiles:
        raise LookupError("no misclassified test image in the records")
    return sum(percentiles) / len(percentiles)


FIGURE_5_6_ANCHORS = (
    Anchor("training accuracy of the CNN ('perfect classification on the training data')",
           "1", metric_mean("train_accuracy"), ClaimRule(agree=1.0, close=0.99),
           cause=misclassified_training_images),
    Anchor("misclassified test images whose rank-1 training image (largest kernel value) is of "
           "the other class, share", "both ('an example of the opposite class ... rank 1')",
           metric_mean("misclassified_rank1_opposite_class_share"),
           ClaimRule(agree=1.0, close=0.5)),
    Anchor("those rank-1 training images are boundary points: percentile of their |a_i| among "
           "the training images (|a_i| < 0.01 ranked as ties at 0), mean",
           "boundary points (|a_i| among the largest)",
           boundary_percentile, ClaimRule(agree=0.9, close=0.75), cause=rank1_neighbours),
    Anchor("self-check (notes section 6): |m + K a - f| / |f| over the test images, "
           "m = f - J theta*", "0 at a stationary theta*",
           metric_mean("self_check_relative_error"),
           ClaimRule(agree=0.01, close=0.1, higher_is_better=False),
           cause=self_check_measured),
    Anchor("test images whose GP-view mean m + K a has the network's sign, share",
           "1 at a stationary theta*", metric_mean("gp_sign_agreement"),
           ClaimRule(agree=1.0, close=0.99), cause=self_check_measured),
)

FIGURE_5_6_NOTES = (
    "Quantities (thesis section 5.3, notes section 6): importances a_i = y_i - s(f(x_i; theta*)) "
    "of the training images, kernel kappa(x*, x) = J(x*) J(x)^T / delta at the trained "
    "network, Jacobians and kernel in float64. Labels y = 1 for '9', y = 0 for '4' [R], so "
    "the most negative a_i are 4s the network finds 9-like (the thesis' left end) and the most "
    "positive 9s it finds 4-like. The thesis' eq. 5.2 f* = sum_i a_i kappa(x*, x_i) leaves out "
    "the linearisation's offset m(x*) = f(x*) - J(x*) theta*; the self-check uses it.",
    "Protocol, our choices [R] where the thesis is silent (notes sections 2.3, 6, 7.7-7.8): "
    "CNN conv 1->3 (5x5), max-pool 2, conv 3->10 (5x5), max-pool 2, linear 160-20-24-1 with "
    "ReLUs (P = 4587, one Bernoulli logit; the thesis gives only P and the layer types); 3000 "
    "training images drawn from the seed among MNIST's training 4s and 9s, every test 4 and 9 "
    "(1991 images) as the test set, pixels / 255; delta = 10; Adam, lr 1e-3 annealed to 0 by a "
    "cosine over 200 epochs of batch 32 on (sum BCE + (delta / 2)|theta|^2) / N, which the "
    "thesis' 'until perfect training accuracy' does not pin down.",
    "Figure 5.6b's test images are not identified in the thesis: we show one correctly "
    "classified test image drawn from the seed and the two misclassified ones the network is "
    "most confident about (largest |f|), each with its 8 training images of largest kappa.",
    "Rows: 'binary MNIST 4 vs 9 (CNN)' holds the thesis' printed setup and its bound "
    "max |a_i| <= 0.2 (judged as an interval: agrees in [0, 0.2], close up to 0.3); 'GP view' "
    "holds our diagnostics, which the thesis does not print: gradient_norm is |grad L| of "
    "L = sum BCE + (delta / 2)|theta|^2 at theta* (autograd's gradient, float64; 0 at a "
    "stationary point), relative_gradient_norm is |grad L| / |delta theta*|.",
    "cpu scale runs the protocol above with one seed (0), as the thesis shows one network; "
    "paper scale adds seeds 1 and 2. smoke scale (tests only, not a result): 48 training and "
    "24 test images, 2 epochs.",
)

FIGURE_5_6 = ArtifactSpec(
    paper="ggn_thesis",
    artifact="figure-5.6",
    title="Figure 5.6: GP view of a CNN on binary MNIST 4 vs 9 (training importances, kernel "
          "neighbours)",
    paper_seed=None,
    row_order=(ROW, CHECK_ROW),
    rules={(ROW, "max_abs_residual"): Interval(0.0, 0.2, close_factor=1.5)},
    causes={(ROW, "max_abs_residual"): max_residual_measured,
            ("self-check*", "*"): SELF_CHECK_CAUSE,
            ("test images whose GP-view mean*", "*"): SELF_CHECK_CAUSE},
    figure=gp_view_figure,
    anchors=FIGURE_5_6_ANCHORS,
    notes=FIGURE_5_6_NOTES,
    needs_data=(DataNeed("mnist", ("train", "test")),),
)

SPECS = [FIGURE_5_6]
