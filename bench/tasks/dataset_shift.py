"""Calibration of classification methods under dataset shift: Laplace Redux Figure 9.

One job = (method node, model seed), through
:func:`~bench.jobs.classification_runner.prepare_job`, so the stored MAP networks and the
methods' stored states of the OOD table are reused (nothing retrains; Laplace refits in
seconds). ``shift``:

* ``{kind: rotation, angles: [0, 15, ..., 180]}``: R-MNIST, the test part (8k) rotated
  counter-clockwise by each angle (the same images at every angle);
* ``{kind: corruption, severities: [0..5], corruptions: [...], n_draws: 10000,
  sample_seed: 711}``: CIFAR-10-C, per severity ``n_draws`` images drawn with replacement from
  the test parts of every listed corruption (severity 0: the clean test part), all severities
  drawn in turn from one generator seeded with ``sample_seed`` (the authors drew from the
  global RNG seeded with their evaluation seed 711).

Cells, row = the variant's row name, column ``<level>/<metric>`` (``angle=15/brier``,
``severity=3/accuracy``): ``brier`` (sum over classes), ``accuracy``, ``nll``, ``confidence``,
``ece`` and ``mce`` (100 bins, every point) and ``ece_paper`` (the authors' code, which drops
confidences >= 0.99; no cell where that leaves no point). Arrays ``levels`` and
``<row>/<metric>`` hold the curves. Health (``record["health"][row]``): finite NLL and accuracy
above chance on the least shifted set (rotation 0, severity 0: the unshifted test part).
"""

from __future__ import annotations

import math

from omegaconf import DictConfig
from torch import Tensor

from bench.contracts.method import ClassifierMethod
from bench.datasets.image_classification import ImageClassificationData, ImageTensors
from bench.harness.errors import ConfigError, require_choice, require_positive
from bench.harness.result import TaskResult
from bench.harness.rng import make_generator
from bench.harness.task_inputs import takes
from bench.jobs.classification_runner import (
    ClassificationJob,
    VariantPredictions,
    predict_variants,
    prepare_job,
    record_health,
)
from bench.metrics.classification_scores import shift_metrics

SHIFT_KINDS = {"rotation": "angle", "corruption": "severity"}


def shifted_sets(shift: DictConfig, data: ImageClassificationData, seed: int
                 ) -> dict[float, ImageTensors]:
    """Shift level -> the shifted test images and labels (module docstring)."""
    kind = require_choice("shift.kind", shift.kind, SHIFT_KINDS)
    if kind == "rotation":
        angles = [float(a) for a in shift.angles]
        if not angles:
            raise ConfigError("shift.angles is empty; give the rotation angles in degrees")
        return {angle: data.rotated_test(angle, seed) for angle in angles}
    n_draws = require_positive("shift.n_draws", shift.n_draws)
    generator = make_generator(int(shift.sample_seed))
    return {float(level): data.corrupted_mixture(int(level), list(shift.corruptions),
                                                 int(n_draws), generator, seed)
            for level in shift.severities}


def level_column(kind: str, level: float, metric: str) -> str:
    """Cell column of one metric at one shift level, e.g. ``angle=15/brier``."""
    return f"{SHIFT_KINDS[kind]}={level:g}/{metric}"


def input_sets(cfg: DictConfig, job: ClassificationJob) -> dict[str, Tensor]:
    """The shifted test inputs of every level (their labels into ``job.labels``); the levels
    as array ``levels``."""
    kind = str(cfg.shift.kind)
    shifted = shifted_sets(cfg.shift, job.data, job.seed)
    job.result.arrays["levels"] = list(shifted)
    sets = {}
    for level, tensors in shifted.items():
        name = level_column(kind, level, "inputs")
        sets[name], job.labels[name] = tensors.x, tensors.y
    return sets


def variant_cells(cfg: DictConfig, job: ClassificationJob, variant: VariantPredictions) -> None:
    """The variant's cells at every shift level and its curves over the levels."""
    kind, result = str(cfg.shift.kind), job.result
    curves: dict[str, list[float]] = {}
    for level in result.arrays["levels"]:
        name = level_column(kind, level, "inputs")
        for metric, value in shift_metrics(variant.predictives[name], job.labels[name],
                                           int(cfg.metrics.n_bins)).items():
            if math.isfinite(value):  # ece_paper is NaN when every confidence >= 0.99
                result.add(variant.row, level_column(kind, level, metric), value)
            curves.setdefault(f"{variant.row}/{metric}", []).append(value)
    result.arrays.update(curves)


@takes(datasets=(ImageClassificationData,), methods=(ClassifierMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit the method node's variants on the seed's MAP network; score every shift level."""
    job = prepare_job(cfg)
    sets = input_sets(cfg, job)
    least_shifted = level_column(str(cfg.shift.kind), min(job.result.arrays["levels"]),
                                 "inputs")
    for variant in predict_variants(cfg, job, sets):
        variant_cells(cfg, job, variant)
        record_health(job, variant, least_shifted)
    return job.result
