"""The load-or-build and publish steps both stores share (:mod:`bench.harness.stored_files`)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from bench.harness.stored_files import publish_folder, publish_stored, stored_or_built


def _build(final: Path, calls: list[Path]):
    def build(partial: Path) -> str:
        calls.append(partial)
        (partial / "result.txt").write_text("built")
        publish_folder(partial, final)
        return "built"
    return build


def test_builds_in_the_partial_folder_once_then_loads_the_finished_folder(tmp_path):
    final = tmp_path / "store" / "seed-3"
    calls: list[Path] = []
    load = lambda path: f"loaded {(path / 'result.txt').read_text()}"  # noqa: E731
    assert stored_or_built(final, "result.txt", load, _build(final, calls)) == "built"
    assert calls == [tmp_path / "store" / "seed-3.partial"]
    assert stored_or_built(final, "result.txt", load, _build(final, calls)) == "loaded built"
    assert len(calls) == 1
    assert sorted(p.name for p in final.parent.iterdir()) == ["seed-3", "seed-3.lock"]


def test_a_folder_without_its_result_file_is_built_again(tmp_path):
    final = tmp_path / "seed-0"
    final.mkdir()
    (final / "history.json").write_text("{}")
    calls: list[Path] = []
    assert stored_or_built(final, "result.txt", lambda path: "loaded",
                           _build(final, calls)) == "built"
    assert len(calls) == 1 and (final / "result.txt").read_text() == "built"


def test_publish_stored_writes_the_three_files_drops_the_checkpoint_and_renames(tmp_path):
    partial, final = tmp_path / "seed-1.partial", tmp_path / "seed-1"
    partial.mkdir()
    (partial / "checkpoint.pt").write_bytes(b"epoch 3")
    publish_stored(partial, final, "weights.pt", {"w": torch.tensor([1.0, 2.0])},
                   {"model": "mlp"}, {"epochs": [{"loss": 0.5}]})
    assert not partial.exists()
    assert sorted(p.name for p in final.iterdir()) == ["history.json", "recipe.json",
                                                       "weights.pt"]
    assert torch.load(final / "weights.pt")["w"].tolist() == [1.0, 2.0]
    assert json.loads((final / "recipe.json").read_text()) == {"model": "mlp"}
    assert json.loads((final / "history.json").read_text()) == {"epochs": [{"loss": 0.5}]}
