"""Tasks and utilities used only by the tests."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from bench.harness.overrides import CONF_DIR
from bench.harness.result import TaskResult

REPO = Path(__file__).resolve().parent.parent
# The shared offline data folder next to the checkout, when there is one.
SHARED_DATA = REPO.parent / "shared" / "data"
# The folders of a results directory that hold trained networks and method states
# (bench.training.network_store, bench.harness.state_store): reused by any job of the same recipe.
TRAINED_STORE_FOLDERS = ("networks", "states")


def session_store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder shared by every worker of this test run (pytest-xdist workers each have their
    own base temporary folder, under one common parent)."""
    base = tmp_path_factory.getbasetemp()
    common = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = common / "trained-store"
    root.mkdir(exist_ok=True)
    return root


def link_trained_store(results_dir: Path, store: Path) -> None:
    """Point ``results_dir``'s trained networks and states at ``store``, so jobs with another
    results directory (their own records) load what an earlier job of the run trained. The stores
    lock per (recipe, seed), so concurrent workers train each one once."""
    results_dir.mkdir(parents=True, exist_ok=True)
    for name in TRAINED_STORE_FOLDERS:
        (store / name).mkdir(exist_ok=True)
        (results_dir / name).symlink_to(store / name, target_is_directory=True)


def compose_config(overrides: list[str]) -> DictConfig:
    """The config ``python -m bench.run <overrides>`` would compose."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    GlobalHydra.instance().clear()
    return cfg


def sleepy_task(cfg: DictConfig) -> TaskResult:
    """Sleeps ``task.sleep_s`` then returns one cell, so a multirun can be killed midway."""
    time.sleep(float(cfg.task.get("sleep_s", 0.0)))
    result = TaskResult()
    result.add("row", "seed", cfg.seed)
    return result


def stepping_task(cfg: DictConfig) -> TaskResult:
    """Loops ``task.steps`` steps through :func:`bench.harness.progress.progress`."""
    from bench.harness.progress import progress

    result = TaskResult()
    for step in progress(range(int(cfg.task.get("steps", 3))), desc="steps", unit="step"):
        result.add("row", f"step {step}", float(step))
    return result


def failing_task(cfg: DictConfig) -> TaskResult:
    """Raises, to check that failures become records with a traceback."""
    raise RuntimeError("deliberate failure for the test")


def nan_task(cfg: DictConfig) -> TaskResult:
    """Returns a NaN cell, which must mark the run failed."""
    result = TaskResult()
    result.add("row", "value", float("nan"))
    return result


def config_error_line(overrides: list[str], results_dir: Path, capsys, monkeypatch) -> str:
    """Run ``bench.run`` on ``overrides``; assert it stops with exit code 2 and one stderr line
    starting with ``error: ``, and return that line."""
    import sys

    from bench.cli.run_command import main as run_main

    monkeypatch.setattr(sys, "argv", ["bench.run"])
    with pytest.raises(SystemExit) as stopped:
        run_main([*overrides, f"results_dir={results_dir}"])
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def assert_verdict_follows_fit_health(cell, records: list[dict], row: str) -> None:
    """A report cell of ``row`` is compared (agrees, close, differs, inconclusive) when every
    record's fit of that row is healthy, and "not comparable" naming the failed fit when one
    is not (smoke fits may be at chance)."""
    health = [r.get("health", {}).get(row) for r in records]
    if all(h is None or h["healthy"] for h in health):
        assert cell["verdict"] in {"agrees", "close", "differs", "inconclusive"}, cell["verdict"]
    else:
        assert cell["verdict"] == "not comparable" and "fit failed" in cell["cause"], (
            cell["verdict"], cell["cause"])


def with_health(record: dict) -> dict:
    """``record`` as a task that records fit health writes it: every row of its cells (or one
    ``grid`` entry where it has none) healthy, unless it already carries health."""
    if record.get("health"):
        return record
    rows = {cell["row"] for cell in record.get("cells") or ()} or {"grid"}
    return {**record, "health": {row: {"healthy": True, "why": "", "checks": {}}
                                 for row in sorted(rows)}}
