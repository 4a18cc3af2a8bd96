"""Laplace Redux Figure 8's grid of Laplace variants: every variant the experiments sweep is
composed from the axis nodes (conf/la_subset, la_structure, la_hyper, la_link), built and
fitted on a tiny LeNet run (16 random images), and predicts a categorical distribution; the
combinations the paper leaves out are one-line ConfigErrors naming them."""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.job_execution import check_method_node
from bench.harness.method_nodes import instantiate_method
from bench.harness.overrides import CONF_DIR
from bench.harness.rng import make_generator
from bench.models.classifiers import build_classifier

pytest.importorskip("laplace")

EXPERIMENTS = ("laplace_redux/figure-8-mnist", "laplace_redux/figure-8")
MNIST = "laplace_redux/figure-8-mnist"
# The tiny run: 16 images, minibatches of 8, a few tuning steps and samples.
TINY = {"tune_steps": 2, "n_samples": 5, "batch_size": 8, "prediction": {"batch_size": 4},
        "online": {"epochs": 1, "batch_size": 8, "hyper_steps": 2,
                   "model": {"name": "lenet_redux", "options": {}}}}


def composed(experiment: str, *overrides: str):
    """The experiment's config (no scale overrides) with ``overrides``."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("config", overrides=[f"experiment={experiment}", *overrides])
    finally:
        GlobalHydra.instance().clear()


def grid(experiment: str) -> list[tuple[str, str]]:
    """(la_posterior, la_link) of every variant the experiment's full sweep holds."""
    sweep = composed(experiment).sweep
    return list(itertools.product(sweep["la_posterior"], sweep["la_link"]))


GRID = grid(MNIST)
EXPECTED = {  # (subset, structure, prior_tuning) of each la_posterior node
    "last_layer_diag": ("last_layer", "diag", "marglik"),
    "last_layer_kron": ("last_layer", "kron", "marglik"),
    "last_layer_full": ("last_layer", "full", "marglik"),
    "all_diag": ("all", "diag", "marglik"),
    "all_kron": ("all", "kron", "marglik"),
    "all_lowrank": ("all", "lowrank", "marglik"),
    "online_all_diag": ("all", "diag", "online_marglik"),
    "online_all_kron": ("all", "kron", "online_marglik")}


def test_both_experiments_sweep_the_same_24_variants():
    assert len(GRID) == 24
    assert grid("laplace_redux/figure-8") == GRID
    assert {posterior for posterior, _ in GRID} == set(EXPECTED)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> TrainingSet:
    generator = make_generator(0)
    return TrainingSet(torch.rand(16, 1, 28, 28, generator=generator),
                       torch.randint(0, 10, (16,), generator=generator), name="random",
                       results_dir=str(tmp_path_factory.mktemp("states")))


@pytest.fixture(scope="module")
def base():
    return build_classifier("lenet_redux", make_generator(1)).eval()


@pytest.mark.parametrize(("posterior", "link"), GRID, ids=[f"{p}-{k}" for p, k in GRID])
@pytest.mark.second_tier
def test_every_variant_is_composed_built_fitted_and_predicts(posterior, link, tiny_data, base):
    cfg = composed(MNIST, f"la_posterior={posterior}", f"la_link={link}")
    node = cfg.method
    subset, structure, tuning = EXPECTED[posterior]
    assert (node.subset_of_weights, node.hessian_structure, node.prior_tuning,
            node.link_approx, node.pred_type) == (subset, structure, tuning, link, "glm")
    assert node.backend == ("BackPackGGN" if subset == "last_layer" else "AsdlGGN")
    node = OmegaConf.merge(OmegaConf.create(OmegaConf.to_container(node, resolve=True)), TINY)
    method = instantiate_method(node)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diagnostics = method.fit(tiny_data, seed=3, base=base)
        probs = method.predict(tiny_data.train_inputs[:4]).probs
    expected_class = {("last_layer", "kron"): "KronLLLaplace", ("last_layer", "diag"):
                      "DiagLLLaplace", ("last_layer", "full"): "FullLLLaplace",
                      ("all", "kron"): "KronLaplace", ("all", "diag"): "DiagLaplace",
                      ("all", "lowrank"): "GGNLowRankLaplace"}
    assert diagnostics["laplace_class"] == expected_class[(subset, structure)]
    assert probs.shape == (4, 10)
    assert torch.isfinite(probs).all()
    assert torch.allclose(probs.sum(dim=1), torch.ones(4, dtype=probs.dtype), atol=1e-5)
    if tuning == "online_marglik":
        assert diagnostics["online_augmentation"] == "none"
        assert len(diagnostics["prior_precision"]) > 1  # layerwise, learned online


def test_low_rank_outside_all_weights_post_hoc_is_a_one_line_config_error():
    cfg = composed(MNIST, "la_posterior=online_all_kron", "la_structure=lowrank")
    with pytest.raises(ConfigError) as error:
        check_method_node(cfg)
    message = str(error.value)
    assert "\n" not in message
    assert ("method.hessian_structure='lowrank' is not valid with "
            "method.subset_of_weights='all' and method.prior_tuning='online_marglik'") in message


def test_online_marglik_over_the_last_layer_is_a_one_line_config_error():
    cfg = composed(MNIST, "la_posterior=online_all_kron", "la_subset=last_layer")
    with pytest.raises(ConfigError) as error:
        check_method_node(cfg)  # what a job runs before its task
    message = str(error.value)
    assert "\n" not in message
    assert ("method.subset_of_weights='last_layer' with method.prior_tuning='online_marglik' "
            "is not a valid combination") in message


@pytest.mark.second_tier
def test_the_links_of_one_online_fit_share_its_trained_state(tiny_data, base):
    """mc and probit of the same online fit: the second loads the stored state."""
    states = []
    for link in ("mc", "probit"):
        cfg = composed(MNIST, "la_posterior=online_all_diag", f"la_link={link}")
        node = OmegaConf.merge(OmegaConf.create(OmegaConf.to_container(cfg.method,
                                                                       resolve=True)), TINY)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            states.append(instantiate_method(node).fit(tiny_data, seed=5, base=base))
    assert states[0]["state_hash"] == states[1]["state_hash"]
    assert states[1]["state_reused"]


def test_the_corrected_ece_stands_beside_the_authors_ece():
    """Four points, 100 bins: two correct at confidence 0.995, one correct at 0.7, one wrong at
    0.6. Over every point ECE = (2 x 0.005 + 0.3 + 0.6) / 4 = 22.75 %; the authors' code drops
    the two points at >= 0.99, so its ECE = (0.3 + 0.6) / 2 = 45 %."""
    from bench.harness.result import TaskResult
    from bench.predictive.categorical import Categorical
    from bench.tasks.laplace_variants import score_cells

    probs = torch.tensor([[0.995, 0.005], [0.995, 0.005], [0.7, 0.3], [0.6, 0.4]],
                         dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1])
    cfg = OmegaConf.create({"metrics": {"n_bins": 100, "calibration": "paper",
                                        "calibration_beside": "corrected",
                                        "ood_score": "max_prob"}})
    result = TaskResult()
    score_cells(result, "r", {"in": Categorical(probs)}, labels, "in", (), cfg)
    cells = {cell.column: cell.value for cell in result.cells}
    assert cells["ece"] == pytest.approx(45.0)
    assert cells["ece_corrected"] == pytest.approx(22.75)


@pytest.mark.parametrize("scale", ["cpu", "paper"])
@pytest.mark.second_tier
def test_every_variant_takes_the_scale_s_settings(scale):
    """A scale's method settings reach every variant of the grid (a key missing from some
    structure nodes would be a struct error when the scale is applied)."""
    from bench.harness.finished_jobs import apply_scale_overrides

    for posterior in EXPECTED:
        overrides = [f"experiment={MNIST}", f"scale={scale}", f"la_posterior={posterior}"]
        cfg = apply_scale_overrides(composed(MNIST, *overrides[1:]), overrides)
        method = instantiate_method(cfg.method)
        assert method.low_rank_data == (5000 if scale == "cpu" else None)


@pytest.mark.second_tier
def test_the_wrn_grid_s_low_rank_fit_leaves_frozen_batchnorm_outside():
    """The CIFAR grid's low-rank variant on a WRN-16-1 (8 random 32x32 images) with its
    BatchNorm frozen (``frozen_batchnorm``; the smoke golden runs the WRN's diag and kron
    fits): the posterior's mean covers the trainable weights only, and the fit, marglik and
    probit predictive run (laplace-torch's own low-rank fit took every parameter and failed
    in the marglik)."""
    cfg = composed("laplace_redux/figure-8", "la_posterior=all_lowrank", "la_link=probit")
    assert cfg.method.frozen_batchnorm
    node = OmegaConf.merge(OmegaConf.create(OmegaConf.to_container(cfg.method, resolve=True)),
                           TINY, {"low_rank": 3})
    generator = make_generator(2)
    data = TrainingSet(torch.rand(8, 3, 32, 32, generator=generator),
                       torch.randint(0, 10, (8,), generator=generator), name="random")
    network = build_classifier("wrn16_4", make_generator(1), widen=1).eval()
    method = instantiate_method(node)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        method.fit(data, seed=3, base=network)
        probs = method.predict(data.train_inputs[:4]).probs
    batchnorm = sum(p.numel() for module in network.modules()
                    if isinstance(module, torch.nn.BatchNorm2d) for p in module.parameters())
    assert batchnorm > 0
    assert method.la.mean.numel() == method.la.n_params == sum(
        p.numel() for p in network.parameters()) - batchnorm
    assert torch.isfinite(probs).all() and probs.shape == (4, 10)
