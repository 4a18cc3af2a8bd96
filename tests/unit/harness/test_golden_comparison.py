"""The golden comparison: tolerant to last-digit float noise, strict about real changes; the
entries kept per machine arithmetic."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.golden import capture
from tests.golden.arithmetic import arithmetic_name
from tests.golden.capture import (
    DATA_ORIGINS_KEY,
    arrays_fingerprint,
    differing_entries,
    entry_mismatches,
    mismatches,
)


def test_fingerprint_summarises_each_numeric_list_by_its_path():
    arrays = {"x": [1.0, -2.0, None], "nested": {"curves": [[0.5, 1.5], [3.0]]}, "label": "a"}

    fingerprint = arrays_fingerprint(arrays)

    assert fingerprint == {"/x": [3, 1, -1.0, 3.0, -2.0, 1.0],
                           "/nested/curves/0": [2, 0, 2.0, 2.0, 0.5, 1.5],
                           "/nested/curves/1": [1, 0, 3.0, 3.0, 3.0, 3.0],
                           "/label": "a"}


def test_fingerprint_of_an_all_missing_list_has_no_extremes():
    assert arrays_fingerprint({"x": [None, None]}) == {"/x": [2, 2, 0.0, 0.0, None, None]}


def test_last_digit_noise_matches_but_a_real_change_does_not():
    cells = [["row", "col", 0.010179455777790964]]
    noisy = [["row", "col", 0.010179455777791346]]
    changed = [["row", "col", 0.0102]]

    assert mismatches(noisy, cells) == []
    assert mismatches(changed, cells) == ["/0/2: 0.0102 != 0.010179455777790964"]


def test_strings_lengths_keys_and_non_numbers_compare_exactly():
    assert mismatches([["a", 1.0]], [["b", 1.0]]) == ["/0/0: 'a' != 'b'"]
    assert mismatches([1.0], [1.0, 2.0]) == [": length 1 != 2"]
    assert mismatches({"a": 1}, {"b": 1}) == [": keys ['a', 'b'] differ"]
    assert mismatches(None, 0.0) == [": None != 0.0"]
    assert mismatches(True, 1) == [": True != 1"]


def test_values_near_zero_use_the_absolute_tolerance():
    assert mismatches(1e-17, -3e-17) == []
    assert mismatches(1e-6, 0.0) != []
    assert not math.isclose(1e-17, -3e-17, rel_tol=1e-7)


def _entry(value: float, status: str = "ok") -> dict:
    return {"status": status, "cells": [["row", "col", value]], "metrics": {}, "arrays": {}}


def test_only_entries_that_differ_from_the_reference_are_kept_per_arithmetic():
    origins = {DATA_ORIGINS_KEY: {"uci/boston": "linked"}}
    reference = {"a": _entry(1.0), "b": _entry(2.0), **origins}
    entries = {"a": _entry(1.0 + 1e-9), "b": _entry(2.1), **origins}

    assert differing_entries(entries, reference) == {"b": _entry(2.1), **origins}
    assert differing_entries({"a": _entry(1.0), **origins}, reference) == {}
    assert entry_mismatches(_entry(1.0, "failed"), _entry(1.0)) == ["status: 'failed' != 'ok'"]


def test_entries_without_a_reference_or_from_other_data_are_refused():
    reference = {"a": _entry(1.0), DATA_ORIGINS_KEY: {"uci/boston": "linked"}}

    with pytest.raises(ValueError, match=r"no reference golden for \['c'\]"):
        differing_entries({"c": _entry(3.0), DATA_ORIGINS_KEY: {"uci/boston": "linked"}},
                          reference)
    with pytest.raises(ValueError, match="data of other origins"):
        differing_entries({"a": _entry(1.5), DATA_ORIGINS_KEY: {"uci/boston": "generated"}},
                          reference)


def test_per_arithmetic_entries_are_stored_beside_the_reference_and_dropped_with_it(
        tmp_path, monkeypatch):
    monkeypatch.setattr(capture, "GOLDEN_DIR", tmp_path)
    with pytest.raises(ValueError, match="no reference goldens"):
        capture.store_entries("paper/table", "smoke", {"a": _entry(1.0)}, this_machine=True)
    capture.store_entries("paper/table", "smoke", {"a": _entry(1.0), "b": _entry(2.0)},
                          this_machine=False)
    mine = capture.store_entries("paper/table", "smoke", {"a": _entry(1.0), "b": _entry(2.5)},
                                 this_machine=True)

    assert mine == tmp_path / "smoke" / "arithmetic" / arithmetic_name() / "paper__table.json"
    assert json.loads(mine.read_text()) == {"b": _entry(2.5)}
    assert capture.store_entries("paper/table", "smoke", {"a": _entry(1.0), "b": _entry(2.0)},
                                 this_machine=True) == mine
    assert not mine.parent.exists()

    capture.store_entries("paper/table", "smoke", {"a": _entry(1.0), "b": _entry(2.5)},
                          this_machine=True)
    capture.store_entries("paper/table", "smoke", {"a": _entry(1.5), "b": _entry(2.0)},
                          this_machine=False)
    assert not mine.exists()
    assert json.loads((tmp_path / "smoke" / "paper__table.json").read_text())["a"] == _entry(1.5)


def test_the_arithmetic_name_is_computed_in_one_thread_and_leaves_the_thread_count():
    first = arithmetic_name()
    arithmetic_name.cache_clear()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert arithmetic_name() == first
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert first.startswith("cpu-") and len(first) == 14
