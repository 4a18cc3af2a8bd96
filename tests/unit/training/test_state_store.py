"""The trained-state store: stored once and reused, resumed after an interruption at the last
checkpoint, one folder per recipe, a state saved under another recipe hash refused."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from bench.harness.errors import ConfigError
from bench.harness.state_store import (
    HISTORY_NAME,
    STATE_NAME,
    state_dir,
    state_recipe_hash,
    stored_state,
)

RECIPE = {"epochs": 3, "lr": 0.5, "data": {"name": "toy", "train_size": 4}}


class Interrupted(RuntimeError):
    """Stands for a killed run."""


def counting_train(epochs: int, calls: list[int], stop_after: int | None = None):
    """A train function whose state after epoch e is x_e = 0.5 x_{e-1} + e (x_0 = seed-free 1);
    it records each epoch it runs in ``calls`` and raises after epoch ``stop_after``."""

    def train(checkpoints):
        saved = checkpoints.load()
        start, x, history = (0, torch.ones(2), []) if saved is None else (
            saved["epoch"], saved["x"], saved["history"])
        for epoch in range(start, epochs):
            x = 0.5 * x + epoch
            history = [*history, {"epoch": epoch}]
            calls.append(epoch)
            checkpoints.save({"epoch": epoch + 1, "x": x, "history": history})
            if stop_after is not None and epoch + 1 == stop_after:
                raise Interrupted
        return {"x": x, "epochs": epochs}, history

    return train


def test_stores_once_and_reloads_with_reused(tmp_path):
    calls: list[int] = []
    first = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, calls), tmp_path)
    second = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, calls), tmp_path)
    assert calls == [0, 1, 2]
    assert not first.reused and second.reused
    # x_1 = 0.5, x_2 = 1.25, x_3 = 2.625 from x_0 = 1
    assert torch.equal(second.state["x"], torch.full((2,), 2.625))
    assert second.state["epochs"] == 3 and second.history == [{"epoch": e} for e in range(3)]
    assert first.path == second.path == state_dir(tmp_path, "toy_method", "toy", RECIPE, 5)
    assert first.path == (tmp_path / "states" / "toy_method" / "toy"
                          / state_recipe_hash(RECIPE) / "seed-5")
    assert sorted(p.name for p in first.path.iterdir()) == [HISTORY_NAME, "recipe.json",
                                                           STATE_NAME]


def test_interrupted_training_resumes_from_the_last_checkpoint(tmp_path):
    calls: list[int] = []
    with pytest.raises(Interrupted):
        stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, calls, stop_after=1),
                     tmp_path / "a")
    assert not state_dir(tmp_path / "a", "toy_method", "toy", RECIPE, 5).exists()
    resumed = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, calls),
                           tmp_path / "a")
    assert calls == [0, 1, 2]
    straight = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, []),
                            tmp_path / "b")
    assert torch.equal(resumed.state["x"], straight.state["x"])
    assert resumed.history == straight.history
    assert not (resumed.path.with_name("seed-5.partial") / "checkpoint.pt").exists()


def test_a_state_saved_under_another_recipe_hash_is_one_line_naming_the_file(tmp_path):
    stored = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, []), tmp_path)
    history = json.loads((stored.path / HISTORY_NAME).read_text())
    history["recipe_hash"] = "0123456789ab"
    (stored.path / HISTORY_NAME).write_text(json.dumps(history))
    with pytest.raises(ConfigError) as error:
        stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, []), tmp_path)
    message = str(error.value)
    assert "\n" not in message and str(stored.path / STATE_NAME) in message
    assert "0123456789ab" in message and state_recipe_hash(RECIPE) in message


def cut_in_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGED_STATE_FILES = {
    "state cut short": (STATE_NAME, cut_in_half),
    "state not a dict": (STATE_NAME, lambda path: torch.save([1, 2], path)),
    "history cut short": (HISTORY_NAME, lambda path: path.write_text('{"epochs": ')),
    "history missing": (HISTORY_NAME, Path.unlink),
    "history without epochs": (HISTORY_NAME, lambda path: path.write_text(
        json.dumps({"recipe_hash": state_recipe_hash(RECIPE)}))),
}


@pytest.mark.parametrize("damage", DAMAGED_STATE_FILES)
def test_a_damaged_stored_state_is_one_line_naming_the_file_and_is_not_retrained(tmp_path,
                                                                                  damage):
    stored = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, []), tmp_path)
    name, spoil = DAMAGED_STATE_FILES[damage]
    spoil(stored.path / name)
    calls: list[int] = []
    with pytest.raises(ConfigError) as error:
        stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, calls), tmp_path)
    message = str(error.value)
    assert "\n" not in message and str(stored.path / name) in message
    assert f"delete the folder {stored.path} to train it again" in message
    assert calls == []


def test_a_damaged_checkpoint_is_discarded_with_a_warning_and_training_starts_again(tmp_path,
                                                                                    caplog):
    calls: list[int] = []
    with pytest.raises(Interrupted):
        stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, calls, stop_after=2),
                     tmp_path)
    checkpoint = state_dir(tmp_path, "toy_method", "toy", RECIPE, 5).with_name(
        "seed-5.partial") / "checkpoint.pt"
    cut_in_half(checkpoint)
    with caplog.at_level(logging.WARNING, logger="bench.training"):
        again = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, calls), tmp_path)
    assert calls == [0, 1, 0, 1, 2]  # every epoch ran again
    assert torch.equal(again.state["x"], torch.full((2,), 2.625))
    assert [r.levelno for r in caplog.records if str(checkpoint) in r.getMessage()
            and "from the first epoch" in r.getMessage()] == [logging.WARNING]
    assert not checkpoint.parent.exists()


def test_a_state_folder_without_its_state_is_trained_again_and_replaced(tmp_path):
    stored = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, []), tmp_path)
    (stored.path / STATE_NAME).unlink()
    again = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, []), tmp_path)
    assert not again.reused and again.path == stored.path
    assert sorted(p.name for p in stored.path.iterdir()) == [HISTORY_NAME, "recipe.json",
                                                            STATE_NAME]
    assert sorted(p.name for p in stored.path.parent.iterdir()) == ["seed-5", "seed-5.lock"]
    assert torch.equal(again.state["x"], torch.full((2,), 2.625))


def test_two_recipes_give_two_folders_and_two_states(tmp_path):
    other = RECIPE | {"lr": 0.1}
    a = stored_state("toy_method", "toy", RECIPE, 5, counting_train(3, []), tmp_path)
    b = stored_state("toy_method", "toy", other, 5, counting_train(2, []), tmp_path)
    assert a.path != b.path and a.path.parent.parent == b.path.parent.parent
    assert not b.reused and b.state["epochs"] == 2
    assert state_recipe_hash(RECIPE) != state_recipe_hash(other)
    assert state_recipe_hash(RECIPE) == state_recipe_hash(dict(reversed(RECIPE.items())))


def test_a_recipe_that_is_not_plain_json_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="plain JSON"):
        stored_state("toy_method", "toy", {"lr": torch.tensor(1.0)}, 0,
                     counting_train(1, []), tmp_path)
