"""Classification metrics of a :class:`~bench.predictive.categorical.Categorical` predictive.

Each metric reads the predictive's class probabilities and integer labels, never a method, and
returns a plain float. Conventions follow the Laplace Redux code (laplace-redux-reproduction-notes
§0): NLL is the mean of -log p(y|x); Brier is the sum over classes of (p_c - 1[y=c])^2, averaged
over points (not divided by C); confidence is the mean largest probability; entropy is in nats;
ECE/MCE use 100 equal-width bins; OOD AUROC treats in-distribution points as the positive class
and scores each point by its largest probability. Every value is a fraction (not a percentage).

Calibration has two protocols:

* ``"corrected"``: torchmetrics' top-label calibration error over every point. Bins are
  left-closed ``[k/B, (k+1)/B)``, and a confidence of exactly 1 counts in a bin of its own.
* ``"paper"``: the Laplace Redux code's variant. Its edges are ``k * (1/B)`` rounded to the
  probabilities' dtype, and a point goes to bin ``k`` when ``edge[k-1] <= conf < edge[k]``. The
  code then averages over bins ``0..B-1``, so the points with ``conf >= edge[B-1]`` (0.99 for
  B = 100) are dropped. ECE is the count-weighted mean of ``|conf - acc|`` over the kept points;
  MCE is the largest gap over the bins, where an empty bin counts as 0. When no point is kept,
  ECE is NaN and MCE is 0, as in that code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor
from torchmetrics.functional.classification import (
    binary_auroc,
    multiclass_calibration_error,
)

from bench.harness.errors import ConfigError, require_choice
from bench.predictive.categorical import Categorical

N_BINS = 100
CALIBRATION_PROTOCOLS = ("corrected", "paper")
OOD_SCORES = ("max_prob", "entropy")


def _labels(predictive: Categorical, labels: Tensor) -> Tensor:
    """Integer labels ``[n]`` on the predictive's device."""
    return labels.reshape(-1).to(device=predictive.probs.device, dtype=torch.long)


def accuracy(predictive: Categorical, labels: Tensor) -> float:
    """Fraction of points whose most probable class is the label (ties: the first class)."""
    labels = _labels(predictive, labels)
    return float((predictive.predicted_class() == labels).double().mean())


def nll(predictive: Categorical, labels: Tensor) -> float:
    """Mean negative log probability of the labels (nats)."""
    return -float(predictive.log_prob(_labels(predictive, labels)).double().mean())


def brier(predictive: Categorical, labels: Tensor) -> float:
    """Mean over points of the squared error summed over classes (range 0 to 2)."""
    probs = predictive.probs.double()
    one_hot = torch.nn.functional.one_hot(_labels(predictive, labels), predictive.n_classes)
    return float(((probs - one_hot) ** 2).sum(dim=-1).mean())


def mean_confidence(predictive: Categorical) -> float:
    """Mean over points of the largest class probability."""
    return float(predictive.confidence().double().mean())


def mean_entropy(predictive: Categorical) -> float:
    """Mean predictive entropy in nats."""
    return float(predictive.entropy().double().mean())


def _paper_calibration(predictive: Categorical, labels: Tensor, n_bins: int) -> tuple[float, float]:
    """ECE and MCE as the Laplace Redux code computes them (module docstring)."""
    confidence = predictive.confidence()
    correct = (predictive.predicted_class() == labels).double()
    steps = torch.arange(n_bins + 1, dtype=torch.float64, device=confidence.device)
    edges = (steps * (1.0 / n_bins)).to(confidence.dtype)
    edges[-1] = 1.0
    bins = torch.bucketize(confidence, edges, right=True)
    kept = bins < n_bins
    bins, confidence, correct = bins[kept], confidence[kept].double(), correct[kept]
    counts = torch.zeros(n_bins, dtype=torch.float64, device=confidence.device)
    counts.index_add_(0, bins, torch.ones_like(confidence))
    conf_sum = torch.zeros_like(counts).index_add_(0, bins, confidence)
    acc_sum = torch.zeros_like(counts).index_add_(0, bins, correct)
    occupied = counts > 0
    gaps = torch.zeros_like(counts)
    gaps[occupied] = (conf_sum[occupied] - acc_sum[occupied]).abs() / counts[occupied]
    n_kept = float(counts.sum())
    ece = float((gaps * counts).sum()) / n_kept if n_kept > 0 else math.nan
    return ece, float(gaps.max())


def calibration_errors(predictive: Categorical, labels: Tensor, n_bins: int = N_BINS,
                       protocol: str = "corrected") -> tuple[float, float]:
    """Expected and maximum calibration error ``(ece, mce)`` with ``n_bins`` equal-width bins.

    ``protocol`` is ``"corrected"`` (torchmetrics, every point) or ``"paper"`` (the Laplace
    Redux code, which drops confidences at or above the last bin edge); see the module docstring.
    """
    require_choice("metrics.calibration", protocol, CALIBRATION_PROTOCOLS)
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise ConfigError(f"metrics.n_bins={n_bins!r} is not valid; it must be a positive integer")
    labels = _labels(predictive, labels)
    if protocol == "paper":
        return _paper_calibration(predictive, labels, n_bins)
    probs, classes = predictive.probs, predictive.n_classes
    ece = multiclass_calibration_error(probs, labels, classes, n_bins=n_bins, norm="l1")
    mce = multiclass_calibration_error(probs, labels, classes, n_bins=n_bins, norm="max")
    return float(ece), float(mce)


def ece(predictive: Categorical, labels: Tensor, n_bins: int = N_BINS,
        protocol: str = "corrected") -> float:
    """Expected calibration error (see :func:`calibration_errors`)."""
    return calibration_errors(predictive, labels, n_bins, protocol)[0]


def mce(predictive: Categorical, labels: Tensor, n_bins: int = N_BINS,
        protocol: str = "corrected") -> float:
    """Maximum calibration error (see :func:`calibration_errors`)."""
    return calibration_errors(predictive, labels, n_bins, protocol)[1]


def in_distribution_score(predictive: Categorical, score: str = "max_prob") -> Tensor:
    """Per-point in-distribution score ``[n]``, larger meaning "more in-distribution".

    ``"max_prob"``: the largest class probability (the Laplace Redux AUROC); ``"entropy"``:
    ``exp(-entropy)``, a monotone map of the negative entropy into (0, 1].
    """
    require_choice("metrics.ood_score", score, OOD_SCORES)
    if score == "max_prob":
        return predictive.confidence()
    return torch.exp(-predictive.entropy())


def ood_auroc(in_distribution: Categorical, out_of_distribution: Categorical,
              score: str = "max_prob") -> float:
    """Area under the ROC curve separating in-distribution (positive class) from OOD points.

    Tied scores count one half (the trapezoidal ROC curve, as sklearn's ``roc_auc_score``).
    Scores are ranked in their own dtype; torchmetrics forms the rates in float32 (about 1e-7).
    """
    scores_in = in_distribution_score(in_distribution, score)
    scores_out = in_distribution_score(out_of_distribution, score).to(scores_in)
    scores = torch.cat([scores_in, scores_out])
    positive = torch.cat([torch.ones_like(scores_in), torch.zeros_like(scores_out)]).long()
    return float(binary_auroc(scores, positive))


def classification_metrics(predictive: Categorical, labels: Tensor,
                           ood: Mapping[str, Categorical] | None = None, n_bins: int = N_BINS,
                           calibration: str = "corrected",
                           ood_score: str = "max_prob") -> dict[str, float]:
    """Every metric of this module as a flat dict for a record.

    In-distribution: ``accuracy``, ``nll``, ``brier``, ``ece``, ``mce``, ``confidence``,
    ``entropy``. For each OOD set ``name`` in ``ood``: ``{name}_auroc`` (against the
    in-distribution predictive), ``{name}_confidence`` and ``{name}_entropy``.
    """
    ece_value, mce_value = calibration_errors(predictive, labels, n_bins, calibration)
    scores = {"accuracy": accuracy(predictive, labels), "nll": nll(predictive, labels),
              "brier": brier(predictive, labels), "ece": ece_value, "mce": mce_value,
              "confidence": mean_confidence(predictive), "entropy": mean_entropy(predictive)}
    for name, shifted in (ood or {}).items():
        scores[f"{name}_auroc"] = ood_auroc(predictive, shifted, ood_score)
        scores[f"{name}_confidence"] = mean_confidence(shifted)
        scores[f"{name}_entropy"] = mean_entropy(shifted)
    return scores


def shift_metrics(predictive: Categorical, labels, n_bins: int) -> dict[str, float]:
    """Brier, accuracy, NLL, confidence, ECE / MCE over every point and the paper's ECE
    (which drops confidences >= 0.99; NaN when that leaves no point)."""
    ece_all, mce_all = calibration_errors(predictive, labels, n_bins, "corrected")
    return {"brier": brier(predictive, labels), "accuracy": accuracy(predictive, labels),
            "nll": nll(predictive, labels), "confidence": mean_confidence(predictive),
            "ece": ece_all, "mce": mce_all,
            "ece_paper": calibration_errors(predictive, labels, n_bins, "paper")[0]}
