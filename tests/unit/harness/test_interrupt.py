"""The ``python -m bench.run`` / ``bench.reproduce`` entry step (:mod:`bench.cli.interrupt`)."""

from __future__ import annotations

import sys
import types

from bench.cli.interrupt import INTERRUPTED, main_status


def _command(monkeypatch, main) -> str:
    name = "tests_fake_command"
    module = types.ModuleType(name)
    module.main = main
    monkeypatch.setitem(sys.modules, name, module)
    return name


def test_exits_with_the_status_main_returns(monkeypatch, capsys):
    assert main_status(_command(monkeypatch, lambda: 3)) == 3
    assert capsys.readouterr().err == ""


def test_exits_with_the_status_main_raises(monkeypatch, capsys):
    def stops():
        raise SystemExit(2)

    assert main_status(_command(monkeypatch, stops)) == 2


def test_ctrl_c_in_main_is_one_line_and_status_130(monkeypatch, capsys):
    def interrupted():
        raise KeyboardInterrupt

    assert main_status(_command(monkeypatch, interrupted)) == 130
    assert capsys.readouterr().err.splitlines() == [INTERRUPTED]
    assert INTERRUPTED.startswith("interrupted") and "skip" in INTERRUPTED
