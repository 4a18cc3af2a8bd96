"""The golden comparison: tolerant to last-digit float noise, strict about real changes; the
invariants compared where the arithmetic cannot be pinned; the bit-for-bit comparison of two
captures."""

from __future__ import annotations

import math

from tests.golden.capture import (
    arrays_fingerprint,
    differing_bits,
    entry_mismatches,
    golden_path,
    invariant_mismatches,
    mismatches,
    store_entries,
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


def test_a_status_change_is_a_mismatch():
    assert entry_mismatches(_entry(1.0, "failed"), _entry(1.0)) == ["status: 'failed' != 'ok'"]


def test_invariants_ignore_a_moved_number_but_not_a_lost_value_or_a_probability_out_of_range():
    stored = {"cells": [["row", "acc", 0.8], ["row", "nll", 2.5], ["row", "gap", None]]}

    assert invariant_mismatches({"cells": [["row", "acc", 0.3], ["row", "nll", 9.0],
                                           ["row", "gap", None]]}, stored) == []
    assert invariant_mismatches({"cells": [["row", "acc", 1.2], ["row", "nll", 9.0],
                                           ["row", "gap", None]]}, stored) == [
        "/cells/0/2: 1.2 outside [0, 1] where 0.8 is stored"]
    assert invariant_mismatches({"cells": [["row", "acc", 0.3], ["row", "nll", math.inf],
                                           ["row", "gap", None]]}, stored) == [
        "/cells/1/2: inf where 2.5 is stored"]
    assert invariant_mismatches({"cells": [["row", "acc", 0.3], ["row", "nll", 9.0]]},
                                stored) == ["/cells: length 2 != 3"]
    assert invariant_mismatches({"cells": [["row", "acc", 0.3], ["row", "nll", 9.0],
                                           ["row", "gap", 0.1]]}, stored) == [
        "/cells/2/2: 0.1 != None"]


def test_two_captures_compare_bit_for_bit(tmp_path):
    entries = {"job": _entry(0.1 + 0.2)}
    store_entries(golden_path("paper/table", "smoke", tmp_path / "a"), entries)
    store_entries(golden_path("paper/table", "smoke", tmp_path / "b"), entries)
    assert differing_bits(tmp_path / "a", tmp_path / "b") == []

    store_entries(golden_path("paper/table", "smoke", tmp_path / "b"),
                  {"job": _entry(0.30000000000000004 + 1e-16)})
    assert differing_bits(tmp_path / "a", tmp_path / "b") == [
        "smoke/paper__table.json: /job/cells/0/2: 0.30000000000000004 != 0.30000000000000016"]
    store_entries(golden_path("paper/other", "smoke", tmp_path / "a"), entries)
    assert differing_bits(tmp_path / "a", tmp_path / "b")[0].startswith(
        "smoke/paper__other.json: not in")
