"""The ``python -m bench.run`` / ``bench.reproduce`` entry step (:mod:`bench.cli.interrupt`)."""

from __future__ import annotations

import sys
import types

from bench.cli import interrupt
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


def test_the_ready_file_exists_before_the_commands_module_is_imported(tmp_path, monkeypatch):
    """A supervisor that waits for the ready file interrupts inside the handled span."""
    ready = tmp_path / "ready"
    monkeypatch.setenv(interrupt.READY_FILE_VARIABLE, str(ready))
    seen = []

    def importing(module):
        seen.append(ready.exists())
        raise KeyboardInterrupt

    monkeypatch.setattr(interrupt.importlib, "import_module", importing)
    assert interrupt.main_status("some.command") == interrupt.INTERRUPTED_STATUS
    assert seen == [True]
