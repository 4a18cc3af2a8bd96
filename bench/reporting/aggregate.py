"""Records -> a long table of cells -> one summary line per (protocol, row, column).

The summary holds the value at the paper's seed, the mean over seeds and a 95% Student-t
confidence interval ``mean ± t_{0.975, k-1} * sd / sqrt(k)`` (NaN for a single seed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bench.harness.records import NON_SEMANTIC_KEYS

CELL_COLUMNS = (
    "protocol", "row", "column", "seed", "status", "value", "finished_at", "record_path", "error",
)
SUMMARY_COLUMNS = (
    "protocol", "row", "column", "ours_paper_seed", "mean", "sd", "ci_low", "ci_high",
    "n_seeds", "n_failed", "seeds", "error", "n_superseded",
)
SEED_KEYS = ("seed", "seeds")


def mean_and_ci(values: Iterable[float], level: float = 0.95) -> tuple[float, float, float, float]:
    """``(mean, sd, ci_low, ci_high)`` of the finite values; sd uses ddof=1.

    The CI is ``mean ± t_{(1+level)/2, k-1} * sd / sqrt(k)``; with fewer than two values the
    sd and CI are NaN, with none everything is NaN.
    """
    finite = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    k = finite.size
    if k == 0:
        return math.nan, math.nan, math.nan, math.nan
    mean = float(finite.mean())
    if k == 1:
        return mean, math.nan, math.nan, math.nan
    sd = float(finite.std(ddof=1))
    half_width = float(stats.t.ppf((1.0 + level) / 2.0, k - 1)) * sd / math.sqrt(k)
    return mean, sd, mean - half_width, mean + half_width


def _without_seeds(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_seeds(v) for k, v in value.items()
            if k not in SEED_KEYS and k not in NON_SEMANTIC_KEYS
        }
    if isinstance(value, list):
        return [_without_seeds(v) for v in value]
    return value


def run_identity(record: dict[str, Any]) -> str:
    """What a run computes apart from its seed: the config with every ``seed`` key removed."""
    config = record.get("config") or {
        key: record.get(key) for key in ("protocol", "dataset", "method", "variant")
    }
    identity = {"protocol": record.get("protocol"), "config": _without_seeds(config)}
    return json.dumps(identity, sort_keys=True, default=str)


def _as_float(value: Any) -> float:
    return math.nan if value is None else float(value)


def _line(record: dict[str, Any], row: str | None, column: str | None, value: float) -> dict:
    return {
        "protocol": record.get("protocol", ""),
        "row": row,
        "column": column,
        "seed": record.get("seed"),
        "status": record.get("status", "failed"),
        "value": value,
        "finished_at": record.get("finished_at") or "",
        "record_path": record.get("_path", ""),
        "error": record.get("error") or "",
    }


def cells_frame(
    records: Iterable[dict[str, Any]],
    failed_cells: Callable[[dict[str, Any]], list[tuple[str, str]]] | None = None,
) -> pd.DataFrame:
    """One line per (record, cell) with the columns of ``CELL_COLUMNS``.

    An ok record contributes its cells, and its ``failed_cells`` (a statistic the task could
    not compute, with the reason) as failed lines. A failed record contributes one line
    (value NaN) per cell it was meant to produce: its own cells if it has any, else
    ``failed_cells(record)``, else the cells of ok records with the same
    :func:`run_identity`. A failed record whose cells cannot be told contributes a single line
    with row and column None.
    """
    records = list(records)
    cells_by_identity: dict[str, dict[tuple[str, str], None]] = {}
    lines = []
    for record in records:
        if record.get("status") != "ok":
            continue
        known = cells_by_identity.setdefault(run_identity(record), {})
        for cell in record.get("cells") or []:
            known[(cell["row"], cell["column"])] = None
            lines.append(_line(record, cell["row"], cell["column"], _as_float(cell["value"])))
        for cell in record.get("failed_cells") or []:
            known[(cell["row"], cell["column"])] = None
            lines.append({**_line(record, cell["row"], cell["column"], math.nan),
                          "status": "failed", "error": cell["reason"]})
    for record in records:
        if record.get("status") == "ok":
            continue
        cells = [(c["row"], c["column"]) for c in record.get("cells") or []]
        if not cells and failed_cells is not None:
            cells = list(failed_cells(record))
        if not cells:
            cells = list(cells_by_identity.get(run_identity(record), {}))
        for row, column in cells or [(None, None)]:
            lines.append(_line(record, row, column, math.nan))
    return pd.DataFrame(lines, columns=list(CELL_COLUMNS))


def finished_order(finished_at: Any) -> tuple[bool, str]:
    """Sort key ordering records or lines by when they finished, a missing time last (counted
    as the latest)."""
    return (_missing(finished_at), "" if _missing(finished_at) else str(finished_at))


def _latest_per_seed(ok: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ok lines sorted by ``finished_at`` (stable; a missing time last), of each seed the
    last, in that order."""
    ordered = sorted(ok, key=lambda line: finished_order(line.get("finished_at")))
    last = {line["seed"]: index for index, line in enumerate(ordered)}
    return [line for index, line in enumerate(ordered) if last[line["seed"]] == index]


def current_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ok records, in their order, without the superseded ones: a record is superseded
    when later ok records of its protocol and seed (by ``finished_at``, a missing time
    counting as latest, as :func:`aggregate_cells` orders them) hold every cell it holds (a
    rerun under a changed config). Claims and fit health read these, so a rerun's record
    replaces its predecessor there as it does in the cells; a record without cells stays."""
    ok = [record for record in records if record.get("status") == "ok"]
    newest_first = sorted(range(len(ok)), reverse=True,
                          key=lambda i: (*finished_order(ok[i].get("finished_at")), i))
    covered: set[tuple[Any, ...]] = set()
    superseded = set()
    for index in newest_first:
        record = ok[index]
        keys = {(record.get("protocol", ""), cell["row"], cell["column"], record.get("seed"))
                for cell in record.get("cells") or ()}
        if keys and keys <= covered:
            superseded.add(index)
        covered |= keys
    return [record for index, record in enumerate(ok) if index not in superseded]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _summarise(group: list[dict[str, Any]], paper_seed: int | None) -> dict[str, Any]:
    ok = [line for line in group if line["status"] == "ok"]
    latest = _latest_per_seed(ok)
    values = [line["value"] for line in latest]
    mean, sd, low, high = mean_and_ci(values)
    at_paper_seed = [line["value"] for line in latest if line["seed"] == paper_seed]
    failed = [line for line in group if line["status"] != "ok"]
    return {
        "ours_paper_seed": float(at_paper_seed[0]) if at_paper_seed else math.nan,
        "mean": mean,
        "sd": sd,
        "ci_low": low,
        "ci_high": high,
        "n_seeds": sum(math.isfinite(value) for value in values),
        "n_failed": len(failed),
        "seeds": " ".join(str(seed) for seed in sorted(line["seed"] for line in latest)),
        "error": failed[0]["error"] if failed else "",
        "n_superseded": len(ok) - len(latest),
    }


def aggregate_cells(frame: pd.DataFrame, paper_seed: int | None) -> pd.DataFrame:
    """One line per (protocol, row, column) of ``frame`` with the columns of ``SUMMARY_COLUMNS``,
    in the order the cells first appear.

    Where one seed has several ok values for a cell (a rerun under a changed config), the
    latest by ``finished_at`` is used and the others are counted in ``n_superseded``.
    Lines of unattributed failures (row None) are left out; see :func:`unattributed_failures`.
    Grouped in plain Python: a pandas group per cell cost about 1 ms, and reports and their
    anchors aggregate thousands of cells.
    """
    groups: dict[tuple[Any, Any, Any], list[dict[str, Any]]] = {}
    for line in frame[frame["row"].notna()].to_dict("records"):
        key = (line["protocol"], line["row"], line["column"])
        if not any(_missing(part) for part in key):
            groups.setdefault(key, []).append(line)
    lines = [{"protocol": protocol, "row": row, "column": column,
              **_summarise(group, paper_seed)}
             for (protocol, row, column), group in groups.items()]
    return pd.DataFrame(lines, columns=list(SUMMARY_COLUMNS))


def unattributed_failures(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Per protocol, the error messages of failed records whose cells are unknown."""
    unknown = frame[frame["row"].isna()]
    return {
        protocol: group["error"].tolist()
        for protocol, group in unknown.groupby("protocol", sort=False)
    }
