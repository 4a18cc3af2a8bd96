"""The ``python -m bench.run`` / ``bench.reproduce`` entry step (:mod:`bench.cli.interrupt`)."""

from __future__ import annotations

import sys
import types

import pytest

from bench.cli.interrupt import INTERRUPTED, exit_with_main


def _command(monkeypatch, main) -> str:
    name = "tests_fake_command"
    module = types.ModuleType(name)
    module.main = main
    monkeypatch.setitem(sys.modules, name, module)
    return name


def test_exits_with_the_status_main_returns(monkeypatch, capsys):
    with pytest.raises(SystemExit) as stop:
        exit_with_main(_command(monkeypatch, lambda: 3))
    assert stop.value.code == 3 and capsys.readouterr().err == ""


def test_ctrl_c_in_main_is_one_line_and_status_130(monkeypatch, capsys):
    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as stop:
        exit_with_main(_command(monkeypatch, interrupted))
    assert stop.value.code == 130
    assert capsys.readouterr().err.splitlines() == [INTERRUPTED]
    assert INTERRUPTED.startswith("interrupted") and "skip" in INTERRUPTED
