"""The golden comparison: tolerant to last-digit float noise, strict about real changes."""

from __future__ import annotations

import math

from tests.golden.capture import arrays_fingerprint, mismatches


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
