"""The digests the stores and the data checks share (:mod:`bench.harness.hashing`)."""

from __future__ import annotations

import math

import pytest

from bench.harness.hashing import canonical_json, file_sha256, json_hash


def test_file_sha256_is_the_standard_digest_of_the_bytes(tmp_path):
    path = tmp_path / "abc.bin"
    path.write_bytes(b"abc")
    assert file_sha256(path) == ("ba7816bf8f01cfea414140de5dae2223"
                                 "b00361a396177a9cb410ff61f20015ad")


def test_file_sha256_of_a_file_of_several_read_blocks(tmp_path):
    path = tmp_path / "zeros.bin"
    path.write_bytes(bytes(3 << 20))
    assert file_sha256(path) == ("bbd05cf6097ac9b1f89ea29d2542c1b7"
                                 "b67ee46848393895f5a9e43fa1f621e5")


def test_json_hash_ignores_key_order_and_is_the_digest_of_the_canonical_text():
    values = {"b": [1, 2.5], "a": "x"}
    assert canonical_json(values) == '{"a":"x","b":[1,2.5]}'
    assert json_hash(values) == json_hash(dict(reversed(values.items()))) == "66efddae6a97"
    assert json_hash({"a": "x", "b": [1, 2.5, 3]}) != json_hash(values)


@pytest.mark.parametrize("value", [math.nan, math.inf, object()])
def test_json_hash_refuses_values_json_cannot_hold(value):
    with pytest.raises((TypeError, ValueError)):
        json_hash({"x": value})
