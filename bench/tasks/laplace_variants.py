"""One point of Laplace Redux's variant grid (appendix C.1, Figure 8): a composed Laplace
variant scored on in-distribution test data and its OOD sets.

One job = (training data, augmentation, fitted posterior, link, model seed). The method node
is ``laplace_classifier`` composed from one node per axis (``conf/la_subset``,
``conf/la_structure``, ``conf/la_hyper``, ``conf/la_link``; the experiment sweeps
``la_posterior`` x ``la_link``). Through the shared step of :mod:`bench.jobs.classification_runner`
it is fitted on the seed's stored MAP network (post-hoc marglik) or trains its own
(online marglik), timed, then predicts on the in-distribution test part and every OOD set.

Cells, row ``"<data>, <DA|no DA> / <subset> <structure> <hyper> <link>"``: ``acc``, ``nll``,
``ece``, ``conf`` (in-distribution, % except NLL; ``ece`` by ``metrics.calibration``, and
``ece_<protocol>`` as well for a ``metrics.calibration_beside`` protocol, so the authors' ECE
can stand beside the corrected one), ``auroc_<set>`` per OOD set and ``auroc``,
their mean (%, the figure's y axis), ``fit_s`` and ``predict_s`` (seconds: the fit, and the
prediction of every set). The job whose method values equal the experiment's ``map_row_with``
(the default variant) also scores the MAP network's softmax on the same sets, row
``"<data>, <DA|no DA> / MAP"`` (the figure's reference point), so that row has one value per
seed.
"""

from __future__ import annotations

from statistics import fmean

from omegaconf import DictConfig, OmegaConf

from bench.contracts.method import ClassifierMethod
from bench.datasets.image_classification import ImageClassificationData
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.jobs.classification_runner import predict_variants, prepare_job, short_name
from bench.methods.baselines.map_classifier import MapClassifier
from bench.metrics.classification_scores import classification_metrics, ece
from bench.metrics.fit_health import assess, classifier_checks
from bench.predictive.categorical import Categorical

PERCENT = 100.0
IN_DISTRIBUTION = {"acc": ("accuracy", PERCENT), "nll": ("nll", 1.0), "ece": ("ece", PERCENT),
                   "conf": ("confidence", PERCENT)}
SUBSETS = {"last_layer": "LL", "all": "all"}
HYPERS = {"marglik": "post-hoc", "online_marglik": "online"}


def data_label(cfg: DictConfig) -> str:
    """``"<data>, DA"`` or ``"<data>, no DA"`` (the paper's short data name)."""
    augmented = str(cfg.dataset.get("augmentation", "none")) != "none"
    return f"{short_name(str(cfg.dataset.images))}, {'DA' if augmented else 'no DA'}"


def variant_label(method: DictConfig) -> str:
    """``"<subset> <structure> <hyper> <link>"`` of a composed Laplace method node."""
    return (f"{SUBSETS.get(method.subset_of_weights, method.subset_of_weights)} "
            f"{method.hessian_structure} "
            f"{HYPERS.get(method.prior_tuning, method.prior_tuning)} {method.link_approx}")


def score_cells(result: TaskResult, row: str, predictives: dict[str, Categorical], labels,
                in_set: str, ood_sets: tuple[str, ...], cfg: DictConfig) -> None:
    """Add one row's cells (module docstring) from its predictive on each set."""
    scores = classification_metrics(
        predictives[in_set], labels, {name: predictives[name] for name in ood_sets},
        n_bins=int(cfg.metrics.n_bins), calibration=str(cfg.metrics.calibration),
        ood_score=str(cfg.metrics.ood_score))
    for column, (metric, scale) in IN_DISTRIBUTION.items():
        result.add(row, column, scale * scores[metric])
    beside = cfg.metrics.get("calibration_beside")
    if beside is not None:
        result.add(row, f"ece_{beside}", PERCENT * ece(predictives[in_set], labels,
                                                      int(cfg.metrics.n_bins), str(beside)))
    aurocs = [PERCENT * scores[f"{name}_auroc"] for name in ood_sets]
    for name, value in zip(ood_sets, aurocs, strict=True):
        result.add(row, f"auroc_{short_name(name)}", value)
    if aurocs:
        result.add(row, "auroc", fmean(aurocs))


def is_map_row_job(cfg: DictConfig) -> bool:
    """Whether this job's method values are the experiment's ``map_row_with``."""
    wanted = cfg.get("map_row_with") or {}
    return bool(wanted) and all(str(cfg.method.get(key)) == str(value)
                                for key, value in wanted.items())


@takes(datasets=(ImageClassificationData,), methods=(ClassifierMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit the composed Laplace variant on the seed's data; score accuracy, NLL, ECE and OOD
    AUROC; time its fit and prediction."""
    job = prepare_job(cfg)
    data, seed = job.data, job.seed
    ood_sets = data.available_ood
    sets = {data.images: job.splits.x_test,
            **{name: data.ood_set(name, seed).x for name in ood_sets}}
    job.result.fitted["ood_needs_data"] = data.missing_ood()
    job.result.fitted["ood_sets"] = list(ood_sets)
    job.result.fitted["variant"] = OmegaConf.to_container(cfg.method, resolve=True)
    prefix = data_label(cfg)
    for variant in predict_variants(cfg, job, sets):
        row = f"{prefix} / {variant_label(cfg.method)}"
        score_cells(job.result, row, variant.predictives, job.splits.y_test, data.images,
                    ood_sets, cfg)
        job.result.health[row] = assess(classifier_checks(variant.predictives[data.images],
                                                          job.splits.y_test))
        job.result.add(row, "fit_s", job.result.timings[f"{variant.row}/fit_s"])
        job.result.add(row, "predict_s", sum(variant.predict_seconds.values()))
        prior = variant.diagnostics.get("prior_precision")
        if isinstance(prior, float):
            job.result.add(row, "prior_precision", prior)
    if job.network is not None and is_map_row_job(cfg):
        reference = MapClassifier(device=str(cfg.device))
        reference.fit(job.training, seed, base=job.network)
        watch = Stopwatch()
        predictives = {name: reference.predict(inputs) for name, inputs in sets.items()}
        row = f"{prefix} / MAP"
        job.result.add(row, "predict_s", watch.elapsed())
        score_cells(job.result, row, predictives, job.splits.y_test, data.images, ood_sets,
                    cfg)
    return job.result
