"""The load-or-build step both stores share (:func:`bench.harness.stored_files.stored_or_built`)."""

from __future__ import annotations

from pathlib import Path

from bench.harness.stored_files import publish_folder, stored_or_built


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
