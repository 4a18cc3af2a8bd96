"""One config schema: every method, dataset and base-network node names the code doing the work.

Each ``conf/<group>/<option>.yaml`` is composed into the root config (inside an experiment
that uses it, so that its interpolations resolve), its ``_target_`` is instantiated, and the
object is checked: methods follow the contract of :mod:`bench.contracts.method` (every variant
too), datasets produce data, base networks train.
"""

from __future__ import annotations

import functools
import inspect

import pytest
import torch
import yaml
from hydra.utils import get_class, get_method, instantiate

from bench.contracts.method import Method
from bench.harness.errors import ConfigError
from bench.harness.method_membership import SWEEP_BY_MEMBERSHIP, methods_appearing_in
from bench.harness.method_nodes import instantiate_method, method_variants
from bench.harness.overrides import CONF_DIR
from bench.harness.rng import make_generator
from bench.training.regression_network import TrainedNetwork
from tests.helpers import compose_config


def options(group: str) -> list[str]:
    """The yaml options of a config group."""
    return sorted(path.stem for path in (CONF_DIR / group).glob("*.yaml"))


@functools.cache
def _experiment_choices() -> tuple[tuple[str, dict[str, list], dict[str, list]], ...]:
    """Per experiment config, read once: its name, the options its defaults choose per group
    and the options its sweep lists per group (``method: appears_in`` expanded)."""
    found = []
    for path in sorted((CONF_DIR / "experiment").rglob("*.yaml")):
        experiment = path.relative_to(CONF_DIR / "experiment").with_suffix("").as_posix()
        config = yaml.safe_load(path.read_text())
        chosen: dict[str, list] = {}
        for entry in config.get("defaults", []):
            if isinstance(entry, dict):
                for key, value in entry.items():
                    group = key.split("@")[0].split(" ")[-1].lstrip("/")
                    chosen.setdefault(group, []).append(value)
        swept = dict(config.get("sweep") or {})
        if swept.get("method") == SWEEP_BY_MEMBERSHIP:
            swept["method"] = methods_appearing_in(experiment, CONF_DIR)
        found.append((experiment, chosen, swept))
    return tuple(found)


def experiments_using(group: str, option: str) -> list[str]:
    """Experiments whose defaults or sweep name ``option`` of ``group`` (or choose the group's
    option by interpolation, as ``override /base: ${protocol}_mlp``)."""
    found = []
    for experiment, chosen_by_group, swept_by_group in _experiment_choices():
        chosen = chosen_by_group.get(group, [])
        swept = swept_by_group.get(group, [])
        by_interpolation = any("${" in str(value) for value in chosen)
        if option in chosen or option in swept or by_interpolation:
            found.append(experiment)
    return found


def composed(group: str, option: str, *extra: str):
    """The root config with ``group=option``, inside the first experiment that uses it."""
    users = experiments_using(group, option)
    context = [f"experiment={users[0]}"] if users else []
    return compose_config([*context, f"{group}={option}", "scale=smoke", *extra])


def target_of(node) -> str:
    """The dotted path a node names (a class or, for a partial, a function)."""
    return str(node._target_)


@pytest.mark.parametrize("option", options("method"))
@pytest.mark.second_tier
def test_method_node_instantiates_the_class_behind_the_contract(option):
    cfg = composed("method", option)
    cls = get_class(target_of(cfg.method))
    variants = {"": {}, **method_variants(cfg.method)}
    for row, arguments in variants.items():
        method = instantiate_method(cfg.method, **arguments)
        assert isinstance(method, Method), row
        if "_target_" not in arguments:
            assert type(method) is cls, row
        assert isinstance(type(method).fits_on_base, bool)
        fit = inspect.signature(type(method).fit).parameters
        assert list(fit) == ["self", "data", "seed", "base"]
        assert fit["base"].default is None
        assert list(inspect.signature(type(method).predict).parameters) == ["self", "x"]


def _data_of(dataset) -> list[torch.Tensor]:
    """Tensors a dataset node produces from seed 0 (its family's entry point)."""
    generator = make_generator(0)
    if hasattr(dataset, "problems"):
        problem = next(iter(dataset.problems(generator, torch.float64)))
        return [problem.data.y, problem.y_grid]
    if hasattr(dataset, "splits"):
        splits = dataset.splits(seed=0)
        return [splits.x_train, splits.y_train, splits.x_test]
    if hasattr(dataset, "split"):
        split = dataset.split(generator)
        return [split.x_train, split.y_train, split.x_test]
    if hasattr(dataset, "sample"):
        sample = dataset.sample(generator)
        return [sample.x_train, sample.y_train, *sample.x_test.values()]
    return list(dataset.design(generator))


def _missing_data(err: BaseException) -> str | None:
    """The message of a FileNotFoundError in the chain (a node whose data files are absent,
    e.g. CIFAR-10 or the KMNIST training images offline), else None."""
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, FileNotFoundError):
        cause = cause.__cause__ or cause.__context__
    return None if cause is None else str(cause)


@pytest.mark.parametrize("option", options("dataset"))
@pytest.mark.second_tier
def test_dataset_node_instantiates_a_class_that_produces_data(option):
    cfg = composed("dataset", option)
    try:
        dataset = instantiate(cfg.dataset)
    except Exception as err:  # noqa: BLE001 - hydra wraps the node's own error
        missing = _missing_data(err)
        if missing is None:
            raise
        pytest.skip(f"data not present here: {missing}")
    assert type(dataset) is get_class(target_of(cfg.dataset))
    assert dataset.name == cfg.dataset.name
    tensors = _data_of(dataset)
    assert tensors and all(t.numel() > 0 and torch.isfinite(t).all() for t in tensors)


@pytest.mark.parametrize("option", options("base"))
@pytest.mark.second_tier
def test_base_node_trains_the_network_the_methods_fit_on(option):
    cfg = composed("base", option, "dataset.n_points=60", "base.max_epochs=1")
    train = instantiate(cfg.base, _convert_="all")
    assert train.func is get_method(target_of(cfg.base))
    network = train(instantiate(cfg.dataset).splits(seed=0), seed=0)
    assert isinstance(network, TrainedNetwork) and torch.isfinite(network.theta).all()


def test_the_protocol_picks_the_base_network_and_the_command_line_can_swap_it():
    paper = compose_config(["experiment=ssla/table-2", "method=nn_ssla"])
    corrected = compose_config(["experiment=ssla/table-2", "method=nn_ssla",
                                "protocol=corrected"])
    swapped = compose_config(["experiment=ssla/table-4", "protocol=corrected",
                              "base=paper_mlp"])
    assert target_of(paper.base).endswith("train_paper_mlp")
    assert target_of(corrected.base).endswith("train_map_mlp")
    assert target_of(swapped.base).endswith("train_paper_mlp")
    assert paper.method.refit.sgd.lr == paper.tuned.mlp.lr
    assert corrected.method.refit.sgd.lr == 0.01
    assert compose_config(["experiment=ssla/figure-1"]).get("base") is None


def test_an_argument_the_method_does_not_take_is_one_line_naming_the_choices():
    cfg = compose_config(["experiment=ssla/table-2", "method=la", "+method.no_such=1"])
    with pytest.raises(ConfigError, match="^method.no_such is not an argument of "
                       "LaplaceTorchMethod; choose from: name, subset_of_weights"):
        instantiate_method(cfg.method)
