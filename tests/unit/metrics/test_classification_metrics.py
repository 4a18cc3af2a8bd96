"""Classification metrics against hand computations on a few points.

Two-class rows ``[c, 1 - c]`` (c >= 0.5) have confidence c and predicted class 0, so a point
is "correct" exactly when its label is 0: this writes calibration cases as (confidence, correct).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from bench.harness.errors import ConfigError
from bench.metrics.classification_scores import (
    accuracy,
    brier,
    calibration_errors,
    classification_metrics,
    mean_confidence,
    mean_entropy,
    nll,
    ood_auroc,
)
from bench.predictive.categorical import Categorical

THREE_CLASS = Categorical(torch.tensor([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3]], dtype=torch.float64))
THREE_CLASS_LABELS = torch.tensor([0, 2])


def two_class(confidences, correct, dtype=torch.float64):
    """Rows ``[c, 1 - c]`` and labels 0 (correct) or 1 (wrong)."""
    c = torch.as_tensor(confidences, dtype=dtype)
    labels = torch.tensor([0 if ok else 1 for ok in correct])
    return Categorical(torch.stack([c, 1 - c], dim=-1)), labels


def with_confidences(scores, n_classes=4):
    """Rows whose largest probability is ``scores`` (the rest shared equally)."""
    s = torch.as_tensor(scores, dtype=torch.float64)[:, None]
    rest = (1 - s) / (n_classes - 1)
    return Categorical(torch.cat([s, rest.expand(-1, n_classes - 1)], dim=-1))


def test_accuracy_nll_brier_confidence_entropy_by_hand():
    # Row 1 predicts 0 (label 0, right), row 2 predicts 1 (label 2, wrong).
    assert accuracy(THREE_CLASS, THREE_CLASS_LABELS) == 0.5
    assert nll(THREE_CLASS, THREE_CLASS_LABELS) == pytest.approx(
        -(math.log(0.7) + math.log(0.3)) / 2, rel=1e-12)
    # (0.3^2 + 0.2^2 + 0.1^2) = 0.14 and (0.2^2 + 0.5^2 + 0.7^2) = 0.78; mean 0.46.
    assert brier(THREE_CLASS, THREE_CLASS_LABELS) == pytest.approx(0.46, rel=1e-12)
    assert mean_confidence(THREE_CLASS) == pytest.approx(0.6, rel=1e-12)
    h1 = -(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1))
    h2 = -(0.2 * math.log(0.2) + 0.5 * math.log(0.5) + 0.3 * math.log(0.3))
    assert mean_entropy(THREE_CLASS) == pytest.approx((h1 + h2) / 2, rel=1e-12)


def test_certain_rows_have_zero_entropy_and_brier_two_when_wrong():
    predictive = Categorical(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    labels = torch.tensor([0, 2])
    assert mean_entropy(predictive) == 0.0
    assert brier(predictive, labels) == pytest.approx(1.0)  # (0 + 2) / 2
    # The wrong row's zero is clamped to the smallest normal float32: finite, -log(tiny) / 2.
    tiny = torch.finfo(torch.float32).tiny
    assert nll(predictive, labels) == pytest.approx(-math.log(tiny) / 2, rel=1e-6)


def test_corrected_calibration_by_hand_with_ten_bins():
    # Bins [0.5, 0.6): conf 0.55, acc 1; [0.6, 0.7): conf 0.65, acc 1/2; [0.9, 1): 0.95, acc 1.
    predictive, labels = two_class([0.55, 0.65, 0.65, 0.95], [1, 1, 0, 1])
    ece, mce = calibration_errors(predictive, labels, n_bins=10)
    assert ece == pytest.approx((0.45 + 2 * 0.15 + 0.05) / 4, abs=1e-6)
    assert mce == pytest.approx(0.45, abs=1e-6)


def test_paper_protocol_drops_confidences_from_the_last_bin_and_corrected_keeps_them():
    predictive, labels = two_class([0.705, 0.725, 0.995, 1.0, 0.992], [1, 0, 1, 1, 0])
    # corrected: [0.70, 0.71) gap 0.295; [0.72, 0.73) gap 0.725; [0.99, 1): conf 0.9935,
    # acc 1/2, gap 0.4935 for two points; conf exactly 1 in its own bin, gap 0.
    ece, mce = calibration_errors(predictive, labels, protocol="corrected")
    assert ece == pytest.approx((0.295 + 0.725 + 2 * 0.4935) / 5, abs=1e-6)
    assert mce == pytest.approx(0.725, abs=1e-6)
    # paper: only 0.705 and 0.725 are kept.
    ece, mce = calibration_errors(predictive, labels, protocol="paper")
    assert ece == pytest.approx((0.295 + 0.725) / 2, abs=1e-12)
    assert mce == pytest.approx(0.725, abs=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_paper_protocol_edge_is_left_closed_at_the_last_bin_in_the_probabilities_dtype(dtype):
    # The code's edge is 99 * 0.01 rounded to the probabilities' dtype: a confidence equal to it
    # is dropped; the next representable value below it is kept (in bin [0.98, 0.99)).
    edge = torch.tensor(99 * 0.01, dtype=torch.float64).to(dtype)
    below = torch.nextafter(edge, torch.zeros((), dtype=dtype))
    predictive, labels = two_class(torch.stack([edge, below]), [0, 0], dtype=dtype)
    ece, mce = calibration_errors(predictive, labels, protocol="paper")
    assert ece == pytest.approx(float(below), abs=1e-12)
    assert mce == pytest.approx(float(below), abs=1e-12)


def test_paper_protocol_ties_at_an_inner_edge_go_to_the_upper_bin():
    # 0.5 and 0.75 are exact edges: [0.5, 0.75) and [0.75, 1) with four bins.
    predictive, labels = two_class([0.5, 0.6, 0.75, 0.8], [1, 0, 0, 0])
    ece, mce = calibration_errors(predictive, labels, n_bins=4, protocol="paper")
    # [0.5, 0.75): conf 0.55, acc 1/2, gap 0.05; [0.75, 1) is the dropped last bin.
    assert ece == pytest.approx(0.05, abs=1e-12) and mce == pytest.approx(0.05, abs=1e-12)
    ece, mce = calibration_errors(predictive, labels, n_bins=4, protocol="corrected")
    # corrected keeps [0.75, 1): conf 0.775, acc 0, gap 0.775.
    assert ece == pytest.approx((2 * 0.05 + 2 * 0.775) / 4, abs=1e-6)
    assert mce == pytest.approx(0.775, abs=1e-6)


def numpy_histogram_calibration(probs: np.ndarray, labels: np.ndarray, n_bins: int):
    """ECE/MCE from numpy's histogram edges and ``digitize`` indices 0..n_bins-1, the
    reading of the Redux code that the notes describe (independent of the torch version)."""
    edges = np.histogram(probs, n_bins, range=(0, 1))[1]
    confidence, predicted = probs.max(axis=1), probs.argmax(axis=1)
    index = np.digitize(confidence, edges)
    gaps, counts = np.zeros(n_bins), np.zeros(n_bins)
    for k in range(n_bins):
        members = index == k
        counts[k] = members.sum()
        if counts[k]:
            gaps[k] = abs(confidence[members].mean() - (predicted == labels)[members].mean())
    return (gaps * counts).sum() / counts.sum(), gaps.max()


def test_paper_protocol_matches_numpy_histogram_binning_in_float32():
    generator = torch.Generator().manual_seed(0)
    logits = 6 * torch.randn(400, 3, generator=generator)
    probs = torch.softmax(logits, dim=-1)
    # Put some confidences exactly on float32 edges, including the dropped 0.99.
    for row, edge in enumerate([0.99, 0.5, 0.07, 0.98, 0.33]):
        c = np.float32(edge)
        probs[row] = torch.tensor([c, (1 - c) / 2, (1 - c) / 2])
    labels = torch.randint(0, 3, (400,), generator=generator)
    expected = numpy_histogram_calibration(probs.numpy(), labels.numpy(), 100)
    ece, mce = calibration_errors(Categorical(probs), labels, protocol="paper")
    # numpy averages float32 confidences in float32, we in float64: equal to about 1e-8; a point
    # in the wrong bin would move ECE by about 1e-3.
    assert ece == pytest.approx(expected[0], rel=1e-6)
    assert mce == pytest.approx(expected[1], rel=1e-6)


def test_paper_protocol_with_every_point_dropped_gives_nan_ece_and_zero_mce():
    predictive, labels = two_class([0.995, 1.0], [1, 0])
    ece, mce = calibration_errors(predictive, labels, protocol="paper")
    assert math.isnan(ece) and mce == 0.0


def test_auroc_counts_pairs_with_ties_as_one_half():
    # In 0.9, 0.8, 0.6 against OOD 0.7, 0.6, 0.3: 3 + 3 + 1 + one tie (1/2) of 9 pairs.
    # torchmetrics forms the ROC rates in float32, hence 1e-6.
    inside, outside = with_confidences([0.9, 0.8, 0.6]), with_confidences([0.7, 0.6, 0.3])
    assert ood_auroc(inside, outside) == pytest.approx(7.5 / 9, abs=1e-6)
    labels = [1, 1, 1, 0, 0, 0]
    assert ood_auroc(inside, outside) == pytest.approx(
        roc_auc_score(labels, [0.9, 0.8, 0.6, 0.7, 0.6, 0.3]), abs=1e-6)


def test_auroc_of_identical_sets_is_one_half_and_of_separated_sets_one():
    same = with_confidences([0.5, 0.5, 0.5])
    assert ood_auroc(same, same) == pytest.approx(0.5)
    assert ood_auroc(with_confidences([0.9, 0.8]), with_confidences([0.4, 0.3])) == 1.0
    assert ood_auroc(with_confidences([0.4, 0.3]), with_confidences([0.9, 0.8])) == 0.0


def test_auroc_by_entropy_ranks_low_entropy_as_in_distribution():
    inside = Categorical(torch.tensor([[1.0, 0.0], [0.9, 0.1]], dtype=torch.float64))
    outside = Categorical(torch.tensor([[0.5, 0.5], [0.1, 0.9]], dtype=torch.float64))
    # Entropies: in 0 and H(0.9); out ln 2 and H(0.9): 3 wins and one tie of 4 pairs.
    assert ood_auroc(inside, outside, score="entropy") == pytest.approx(3.5 / 4, abs=1e-6)
    # By max probability the second rows tie too, and [0.1, 0.9] has max 0.9.
    assert ood_auroc(inside, outside) == pytest.approx(3.5 / 4, abs=1e-6)


def test_classification_metrics_names_every_value():
    ood = {"kmnist": with_confidences([0.4, 0.34], n_classes=3)}
    scores = classification_metrics(THREE_CLASS, THREE_CLASS_LABELS, ood=ood)
    assert sorted(scores) == sorted(["accuracy", "nll", "brier", "ece", "mce", "confidence",
                                     "entropy", "kmnist_auroc", "kmnist_confidence",
                                     "kmnist_entropy"])
    assert scores["brier"] == pytest.approx(0.46)
    assert scores["kmnist_auroc"] == 1.0  # 0.7 and 0.5 against 0.4 and 0.34
    assert scores["kmnist_confidence"] == pytest.approx(0.37)
    # ECE with 100 bins: conf 0.7 correct (gap 0.3), conf 0.5 wrong (gap 0.5).
    assert scores["ece"] == pytest.approx(0.4, abs=1e-6)
    assert scores["mce"] == pytest.approx(0.5, abs=1e-6)


@pytest.mark.parametrize(("arguments", "message"), [
    ({"protocol": "redux"}, r"^metrics\.calibration='redux' is not valid; choose one of: "
                            "corrected, paper$"),
    ({"n_bins": 0}, r"^metrics\.n_bins=0 is not valid"),
    ({"n_bins": 2.5}, r"^metrics\.n_bins=2\.5 is not valid"),
])
def test_bad_calibration_options_are_one_line_config_errors(arguments, message):
    with pytest.raises(ConfigError, match=message):
        calibration_errors(THREE_CLASS, THREE_CLASS_LABELS, **arguments)


def test_bad_ood_score_is_a_one_line_config_error():
    with pytest.raises(ConfigError, match=r"^metrics\.ood_score='max' is not valid; choose one "
                                          "of: max_prob, entropy$"):
        ood_auroc(THREE_CLASS, THREE_CLASS, score="max")
