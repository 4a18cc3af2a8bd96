"""The command line of the size-driven benchmarks (:mod:`bench.benchmarks.command_line`)."""

from __future__ import annotations

import pytest

from bench.benchmarks.command_line import chosen_sizes, sized_parser

FULL = {"n_test": 8000, "repeats": 7, "hidden": 25}
QUICK = {"n_test": 64, "repeats": 1, "hidden": 6}
SIZES = {"n_test": "test inputs", "repeats": "timed rounds"}


def test_quick_picks_the_small_sizes_and_a_given_size_replaces_its_entry():
    args = sized_parser("bench", SIZES).parse_args(["--quick", "--n-test", "5"])
    assert chosen_sizes(args, QUICK, FULL, SIZES) == {"n_test": 5, "repeats": 1, "hidden": 6}
    assert args.threads == 1 and args.out is None and not hasattr(args, "device")


def test_full_sizes_by_default_and_the_tables_are_not_changed():
    args = sized_parser("bench", SIZES, device=True).parse_args(
        ["--repeats", "2", "--device", "cuda", "--threads", "4", "--out", "r.md"])
    assert chosen_sizes(args, QUICK, FULL, SIZES) == {"n_test": 8000, "repeats": 2,
                                                      "hidden": 25}
    assert (args.device, args.threads, args.out) == ("cuda", 4, "r.md")
    assert FULL["repeats"] == 7


def test_only_the_listed_sizes_are_options():
    with pytest.raises(SystemExit):
        sized_parser("bench", SIZES).parse_args(["--hidden", "3"])
