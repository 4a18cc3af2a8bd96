"""The trained-network store: recipe hashing, reuse, resume after interruption, locking."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import shutil
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

import bench.training.network_store as store
from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.training.classifier import TrainingStage
from bench.training.network_store import (
    DatasetIdentity,
    TrainingRecipe,
    lenet5_mnist_recipe,
    network_dir,
    recipe_for,
    recipe_hash,
    trained_network,
)

N = 40


def tiny_recipe(**changes) -> TrainingRecipe:
    values = {"model": "lenet_redux",
              "dataset": DatasetIdentity("random", "uniform", (1, 28, 28), N),
              "stages": (TrainingStage(epochs=2, lr=1e-3, batch_size=16, schedule="cosine"),
                         TrainingStage(epochs=1, lr=0.01, batch_size=16, optimizer="sgd",
                                       momentum=0.9, weight_decay=0.01,
                                       weight_decay_mode="objective"))}
    return TrainingRecipe(**(values | changes))


def tiny_data():
    g = make_generator(0)
    return torch.rand(N, 1, 28, 28, generator=g), torch.randint(0, 10, (N,), generator=g)


def weights(network) -> dict:
    return network.module.state_dict()


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_second_call_loads_the_stored_network_and_trains_nothing(tmp_path, monkeypatch):
    images, labels = tiny_data()
    recipe = tiny_recipe()
    first = trained_network(recipe, 3, images, labels, tmp_path)
    expected_dir = tmp_path / "networks" / "lenet_redux" / "random" / recipe_hash(recipe) / "seed-3"
    assert not first.reused and first.path == expected_dir == network_dir(tmp_path, recipe, 3)
    assert sorted(p.name for p in expected_dir.iterdir()) == ["history.json", "recipe.json",
                                                             "weights.pt"]
    assert [(h["stage"], h["epoch"]) for h in first.history] == [(0, 0), (0, 1), (1, 0)]
    assert not first.module.training
    saved = json.loads((expected_dir / "recipe.json").read_text())
    assert recipe_hash(TrainingRecipe.from_dict(saved)) == recipe_hash(recipe)

    def no_training(*args, **kwargs):
        raise AssertionError("a stored network was trained again")

    monkeypatch.setattr(store, "train_classifier", no_training)
    second = trained_network(recipe, 3, images, labels, tmp_path)
    assert second.reused and second.history == first.history
    assert same_weights(weights(first), weights(second))
    with pytest.raises(AssertionError, match="trained again"):
        trained_network(recipe, 4, images, labels, tmp_path)  # another seed is another network


def test_default_results_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path))
    images, labels = tiny_data()
    recipe = tiny_recipe(stages=(TrainingStage(epochs=1, lr=1e-3, batch_size=20),))
    network = trained_network(recipe, 0, images, labels)
    assert network.path == network_dir(tmp_path, recipe, 0) and network.path.is_dir()


@pytest.mark.parametrize("stop_after", [1, 2])  # inside the first stage, at the stage boundary
def test_interrupted_then_resumed_training_equals_uninterrupted(tmp_path, stop_after):
    images, labels = tiny_data()
    recipe = tiny_recipe()
    straight = trained_network(recipe, 1, images, labels, tmp_path / "straight")

    def interrupt(checkpoint):
        if len(checkpoint.history) == stop_after:
            raise KeyboardInterrupt

    results = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        trained_network(recipe, 1, images, labels, results, on_epoch_end=interrupt)
    final = network_dir(results, recipe, 1)
    partial = final.with_name("seed-1.partial")
    assert not final.exists() and (partial / "checkpoint.pt").exists()
    seen = []
    resumed = trained_network(recipe, 1, images, labels, results,
                              on_epoch_end=lambda c: seen.append(len(c.history)))
    assert seen == list(range(stop_after + 1, 4))  # only the remaining epochs ran
    assert not resumed.reused and not partial.exists()
    assert not (final / "checkpoint.pt").exists()
    assert same_weights(weights(straight), weights(resumed))
    assert ([h["objective"] for h in resumed.history]
            == [h["objective"] for h in straight.history])


@pytest.fixture(scope="module")
def stored_tiny(tmp_path_factory):
    """A results folder holding the tiny network of seed 2, and that network (tests copy it)."""
    images, labels = tiny_data()
    results = tmp_path_factory.mktemp("stored")
    return results, trained_network(tiny_recipe(), 2, images, labels, results)


def copy_of_store(stored_tiny, tmp_path) -> tuple[Path, Path]:
    """A copy of the stored results folder and the network's folder in it."""
    results = tmp_path / "results"
    shutil.copytree(stored_tiny[0], results)
    return results, network_dir(results, tiny_recipe(), 2)


def cut_in_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def no_training(*args, **kwargs):
    raise AssertionError("a stored network was trained again")


DAMAGED_NETWORK_FILES = {
    "weights cut short": ("weights.pt", cut_in_half),
    "weights not a state dict": ("weights.pt", lambda path: torch.save([1, 2], path)),
    "recipe cut short": ("recipe.json", lambda path: path.write_text('{"model": ')),
    "recipe missing": ("recipe.json", Path.unlink),
    "recipe not a recipe": ("recipe.json", lambda path: path.write_text('{"colour": 1}')),
    "history empty": ("history.json", lambda path: path.write_text("")),
    "history without epochs": ("history.json", lambda path: path.write_text("{}")),
}


@pytest.mark.parametrize("damage", DAMAGED_NETWORK_FILES)
def test_a_damaged_stored_network_is_one_line_naming_the_file_and_is_not_retrained(
        stored_tiny, tmp_path, monkeypatch, damage):
    results, final = copy_of_store(stored_tiny, tmp_path)
    name, spoil = DAMAGED_NETWORK_FILES[damage]
    spoil(final / name)
    monkeypatch.setattr(store, "train_classifier", no_training)
    images, labels = tiny_data()
    with pytest.raises(ConfigError) as error:
        trained_network(tiny_recipe(), 2, images, labels, results)
    message = str(error.value)
    assert "\n" not in message and str(final / name) in message
    assert f"delete the folder {final} to train it again" in message


@pytest.mark.parametrize("spoil", [cut_in_half, lambda path: torch.save({"stage": 0}, path)],
                         ids=["cut short", "not a checkpoint"])
def test_a_damaged_checkpoint_is_discarded_with_a_warning_and_training_starts_again(
        stored_tiny, tmp_path, caplog, spoil):
    images, labels = tiny_data()
    recipe = tiny_recipe()

    def interrupt(checkpoint):
        if len(checkpoint.history) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        trained_network(recipe, 2, images, labels, tmp_path, on_epoch_end=interrupt)
    checkpoint = network_dir(tmp_path, recipe, 2).with_name("seed-2.partial") / "checkpoint.pt"
    spoil(checkpoint)
    seen = []
    with caplog.at_level(logging.WARNING, logger="bench.training"):
        again = trained_network(recipe, 2, images, labels, tmp_path,
                                on_epoch_end=lambda c: seen.append(len(c.history)))
    assert seen == [1, 2, 3]  # every epoch ran again
    assert same_weights(weights(stored_tiny[1]), weights(again))
    assert [r.levelno for r in caplog.records if str(checkpoint) in r.getMessage()
            and "from the first epoch" in r.getMessage()] == [logging.WARNING]
    assert not checkpoint.parent.exists()


def test_a_store_folder_without_weights_is_trained_again_and_replaced(stored_tiny, tmp_path):
    results, final = copy_of_store(stored_tiny, tmp_path)
    (final / "weights.pt").unlink()
    images, labels = tiny_data()
    again = trained_network(tiny_recipe(), 2, images, labels, results)
    assert not again.reused and again.path == final
    assert sorted(p.name for p in final.iterdir()) == ["history.json", "recipe.json",
                                                      "weights.pt"]
    assert sorted(p.name for p in final.parent.iterdir()) == ["seed-2", "seed-2.lock"]
    assert same_weights(weights(stored_tiny[1]), weights(again))
    assert trained_network(tiny_recipe(), 2, images, labels, results).reused


def _train_in_child(results, barrier, queue) -> None:
    torch.set_num_threads(1)
    images, labels = tiny_data()
    barrier.wait()
    network = trained_network(tiny_recipe(), 0, images, labels, results)
    queue.put(network.reused)


@pytest.mark.second_tier  # two forked processes racing for one store
def test_two_processes_asking_at_once_train_once(tmp_path):
    context = multiprocessing.get_context("fork")
    barrier, queue = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_train_in_child, args=(tmp_path, barrier, queue))
               for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    assert sorted(queue.get(timeout=5) for _ in workers) == [False, True]
    images, labels = tiny_data()
    stored = trained_network(tiny_recipe(), 0, images, labels, tmp_path)
    alone = trained_network(tiny_recipe(), 0, images, labels, tmp_path / "alone")
    assert stored.reused
    # the children ran one thread each: equal up to the order of float sums
    for key, value in weights(alone).items():
        torch.testing.assert_close(weights(stored)[key], value, rtol=1e-5, atol=1e-6)


def _variants() -> list[tuple[str, TrainingRecipe]]:
    base = tiny_recipe()
    stage = base.stages[0]
    variants = [("model", tiny_recipe(model="lenet5")),
                ("num_classes", tiny_recipe(num_classes=9)),
                ("stages", tiny_recipe(stages=base.stages[:1])),
                ("stage order", tiny_recipe(stages=base.stages[::-1])),
                ("model_options", tiny_recipe(model="wrn16_4",
                                              dataset=DatasetIdentity("c", "x", (3, 32, 32), 1),
                                              model_options={"dropout": 0.0}))]
    for name, value in (("name", "mnist"), ("preprocessing", "pixels/255"),
                        ("image_shape", (1, 28, 27)), ("train_size", N + 1)):
        dataset = dataclasses.replace(base.dataset, **{name: value})
        variants.append((f"dataset.{name}", tiny_recipe(dataset=dataset)))
    for name, value in (("epochs", 3), ("lr", 2e-3), ("batch_size", 17),
                        ("optimizer", "adamw"), ("weight_decay", 1e-4),
                        ("weight_decay_mode", "objective"), ("schedule", "none"),
                        ("min_lr", 1e-6)):
        changed = dataclasses.replace(stage, **{name: value})
        variants.append((f"stages[0].{name}", tiny_recipe(stages=(changed, *base.stages[1:]))))
    sgd = base.stages[1]
    for name, value in (("momentum", 0.5), ("nesterov", True)):
        changed = dataclasses.replace(sgd, **{name: value})
        variants.append((f"stages[1].{name}", tiny_recipe(stages=(stage, changed))))
    return variants


def test_recipe_hash_changes_with_every_field():
    stage_fields = {f.name for f in dataclasses.fields(TrainingStage)}
    variants = _variants()
    covered = {name.split(".")[-1] for name, _ in variants}
    assert stage_fields <= covered  # every stage field is varied once
    hashes = [recipe_hash(tiny_recipe())] + [recipe_hash(recipe) for _, recipe in variants]
    assert len(set(hashes)) == len(hashes)


def test_recipe_hash_ignores_how_equal_values_are_written():
    base = tiny_recipe()
    written_differently = TrainingRecipe.from_dict(json.loads(json.dumps(base.to_dict())))
    integer_lr = tiny_recipe(stages=(dataclasses.replace(base.stages[0], lr=1), base.stages[1]))
    float_lr = tiny_recipe(stages=(dataclasses.replace(base.stages[0], lr=1.0), base.stages[1]))
    listed_shape = tiny_recipe(dataset=DatasetIdentity("random", "uniform", [1, 28, 28], N))
    assert recipe_hash(written_differently) == recipe_hash(base) == recipe_hash(listed_shape)
    assert recipe_hash(integer_lr) == recipe_hash(float_lr)
    options = {"dataset": DatasetIdentity("c", "x", (3, 32, 32), 1), "model": "wrn16_4"}
    assert (recipe_hash(tiny_recipe(model_options={"dropout": 0.3}, **options))
            == recipe_hash(tiny_recipe(model_options=(("dropout", 0.3),), **options)))
    assert len(recipe_hash(base)) == 12
    assert recipe_hash(lenet5_mnist_recipe()) == recipe_hash(lenet5_mnist_recipe())


@pytest.mark.parametrize(("changes", "message"), [
    ({"model": "lenet7"}, "recipe.model.name='lenet7' is not valid; choose one of: lenet5"),
    ({"model_options": {"dropout": 0.1}},
     "recipe.model.options.dropout=0.1 is not an option of lenet_redux"),
    ({"dataset": DatasetIdentity("a/b", "x", (1, 28, 28), 4)}, "recipe.dataset.name='a/b'"),
    ({"dataset": DatasetIdentity("a", "x", (1, 28), 4)},
     r"recipe.dataset.image_shape=\[1, 28\] is not valid"),
    ({"dataset": DatasetIdentity("a", "x", (1, 28, 28), 0)}, "recipe.dataset.train_size=0"),
    ({"num_classes": 1}, "recipe.num_classes=1 is not valid"),
    ({"stages": ()}, "recipe.stages is empty"),
    ({"stages": (TrainingStage(epochs=1, lr=0.0, batch_size=4),)},
     "recipe.stages\\[0\\].lr=0.0 is not valid; it must be a positive number"),
    ({"stages": (TrainingStage(1, 0.1, 4), TrainingStage(1, 0.1, 4, optimizer="lbfgs"))},
     "recipe.stages\\[1\\].optimizer='lbfgs' is not valid"),
])
def test_bad_recipe_values_are_one_line_config_errors_naming_the_key(changes, message):
    with pytest.raises(ConfigError, match=message) as caught:
        tiny_recipe(**changes)
    assert "\n" not in str(caught.value)


def test_unknown_keys_in_a_recipe_dict_and_mismatched_data_are_config_errors(tmp_path):
    values = tiny_recipe().to_dict()
    with pytest.raises(ConfigError, match="recipe.optimiser is not a recipe field"):
        TrainingRecipe.from_dict(values | {"optimiser": "adam"})
    with pytest.raises(ConfigError, match=r"recipe.stages\[0\].learning_rate is not a stage"):
        TrainingRecipe.from_dict(values | {"stages": [{"learning_rate": 1.0}]})
    with pytest.raises(ConfigError, match="recipe.dataset.train_size is missing"):
        TrainingRecipe.from_dict(values | {"dataset": {"name": "a", "preprocessing": "x",
                                                       "image_shape": [1, 28, 28]}})
    images, labels = tiny_data()
    with pytest.raises(ConfigError, match=f"recipe.dataset.train_size={N} does not match 39"):
        trained_network(tiny_recipe(), 0, images[1:], labels[1:], tmp_path)
    with pytest.raises(ConfigError, match="recipe.dataset.image_shape=.* does not match"):
        trained_network(tiny_recipe(), 0, images[:, :, 1:], labels, tmp_path)
    out_of_range = labels.clone()
    out_of_range[0] = 10
    with pytest.raises(ConfigError, match="recipe.num_classes=10 needs int64 labels"):
        trained_network(tiny_recipe(), 0, images, out_of_range, tmp_path)
    assert not (tmp_path / "networks").exists()


def pretrained_file(tmp_path, num_classes=7, seed=11):
    """A lenet_redux state dict with a ``num_classes``-way head, saved as a weights file."""
    from bench.models.classifiers import build_classifier

    net = build_classifier("lenet_redux", make_generator(seed), num_classes=num_classes)
    path = tmp_path / f"pretrained-{seed}.pt"
    torch.save(net.state_dict(), path)
    return path, net.state_dict()


def test_pretrained_weights_enter_the_hash_by_content_not_path(tmp_path):
    path, _ = pretrained_file(tmp_path)
    copy = tmp_path / "elsewhere" / "copy.pt"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    other, _ = pretrained_file(tmp_path, seed=12)
    plain = recipe_hash(tiny_recipe())
    from_path, from_copy, from_other = (recipe_hash(tiny_recipe(pretrained=str(p)))
                                        for p in (path, copy, other))
    assert from_path == from_copy and len({plain, from_path, from_other}) == 3
    recipe = tiny_recipe(pretrained=str(path))
    assert recipe.to_dict()["pretrained"] == {
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert "pretrained" not in tiny_recipe().to_dict()
    assert recipe_hash(TrainingRecipe.from_dict(recipe.to_dict())) == from_path


def test_training_starts_from_the_pretrained_weights_with_a_fresh_head(tmp_path):
    path, saved = pretrained_file(tmp_path)
    images, labels = tiny_data()
    # One SGD epoch at a negligible learning rate: the trained network is its start.
    stage = TrainingStage(epochs=1, lr=1e-12, batch_size=16, optimizer="sgd")
    recipe = tiny_recipe(stages=(stage,), pretrained=str(path))
    network = trained_network(recipe, 0, images, labels, tmp_path / "results")
    fresh = trained_network(tiny_recipe(stages=(stage,)), 0, images, labels,
                            tmp_path / "results")
    ours = weights(network)
    head = [k for k in ours if saved[k].shape != ours[k].shape]
    assert head == ["head.4.weight", "head.4.bias"]
    for key, value in ours.items():
        expected = weights(fresh)[key] if key in head else saved[key]
        torch.testing.assert_close(value, expected, rtol=0, atol=1e-9)
    history = json.loads((network.path / "history.json").read_text())
    assert history["initial_weights"]["kept_fresh"] == head


def test_a_missing_pretrained_file_is_one_line_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"^recipe.pretrained='.*nope.pt': no such weights "
                                          r"file"):
        tiny_recipe(pretrained=str(tmp_path / "nope.pt"))


def test_recipe_for_a_network_node_adds_the_data_identity():
    node = {"_target_": "bench.training.network_store.TrainingRecipe.from_dict",
            "model": "lenet_redux", "num_classes": 10,
            "stages": [stage.to_dict() for stage in tiny_recipe().stages]}
    identity = {"name": "random", "preprocessing": "uniform", "image_shape": [1, 28, 28],
                "train_size": N}
    assert recipe_for(node, identity) == tiny_recipe()
    assert recipe_hash(recipe_for(OmegaConf.create(node), identity)) == recipe_hash(tiny_recipe())
    assert "_target_" in node


def test_the_model_node_gives_the_recipe_of_the_stored_spelling():
    values = tiny_recipe(model="wrn16_4", model_options={"widen": 1}).to_dict()
    assert values["model"] == "wrn16_4" and values["model_options"] == {"widen": 1}
    node = {k: v for k, v in values.items() if k != "model_options"}
    node["model"] = {"name": "wrn16_4", "options": {"widen": 1}}
    assert TrainingRecipe.from_dict(node) == TrainingRecipe.from_dict(values)
    assert TrainingRecipe.from_dict(node).model_node() == {"name": "wrn16_4",
                                                           "options": {"widen": 1}}
    plain = {k: v for k, v in tiny_recipe().to_dict().items() if k != "model_options"}
    for options in ({}, None):
        spelled = plain | {"model": {"name": "lenet_redux", "options": options}}
        assert recipe_hash(TrainingRecipe.from_dict(spelled)) == recipe_hash(tiny_recipe())


@pytest.mark.parametrize(("model", "extra", "message"), [
    ({"name": "lenet_redux", "width": 3}, {},
     "^recipe.model.width is not a key of the model node; keys: name, options$"),
    ({"name": "lenet_redux", "options": {}}, {"model_options": {}},
     r"^recipe.model_options=\{\} beside the model node: give the options as "
     "recipe.model.options$"),
    ({"name": "lenet_redux", "options": [1]}, {}, r"^recipe.model.options=\[1\] is not valid"),
    ({"name": "lenet_redux", "options": {"dropout": 0.1}}, {},
     "^recipe.model.options.dropout=0.1 is not an option of lenet_redux"),
    ({"name": "lenet7", "options": {}}, {}, "^recipe.model.name='lenet7' is not valid"),
])
def test_a_bad_model_node_is_one_line_naming_the_key(model, extra, message):
    values = {k: v for k, v in tiny_recipe().to_dict().items() if k != "model_options"}
    with pytest.raises(ConfigError, match=message) as caught:
        TrainingRecipe.from_dict(values | {"model": model} | extra)
    assert "\n" not in str(caught.value)
