"""Compare the records of one experiment run on two devices, record by record and cell by cell.

Records are paired by their config with every ``device`` key removed (at any depth: the
method and dataset nodes copy ``${device}``), hashed as the harness hashes configs
(:func:`bench.harness.records.config_hash`, which also drops ``results_dir`` and the other
non-semantic keys). A pair must have the same status and the same cells, failed cells and
metrics (metrics are compared as the cells of a row named ``(metrics)``); each value must agree
within the tolerance of the first rule of :data:`RULES` matching its (experiment, row, column),
else :data:`FLOAT`. Every mismatch becomes one line naming the experiment, the record, the row,
the column and both values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from bench.harness.records import config_hash

METRICS_ROW = "(metrics)"


@dataclass(frozen=True)
class Tolerance:
    """How two values of one cell are compared: ``|candidate - reference| <= atol + rtol *
    |reference|``; with ``rtol=None`` only their presence is compared (both numbers, or both
    empty), not the values."""

    name: str
    rtol: float | None
    atol: float = 0.0

    def accepts(self, reference: float | None, candidate: float | None) -> bool:
        """Whether ``candidate`` agrees with ``reference`` under this tolerance."""
        if reference is None or candidate is None:
            return reference is None and candidate is None
        if self.rtol is None:
            return True
        return abs(candidate - reference) <= self.atol + self.rtol * abs(reference)

    def describe(self) -> str:
        """``atol + rtol * |reference|`` as text, or why the values are not compared."""
        if self.rtol is None:
            return f"{self.name}: values not compared"
        return f"{self.name} tolerance {self.atol:g} + {self.rtol:g} * |reference|"


# The same float program on a GPU sums in another order and uses other kernels: float32
# results agree to ~1e-6 relative per operation, which the smoke scale's short training runs
# amplify (the golden cells see ~1e-5 between two CPUs after a thousand VI steps,
# tests/golden/capture.py). rtol 1e-3 leaves a decade of margin above that; atol 1e-4 covers
# cells that are zero on one device and 1e-7 on the other. A count-based cell (an accuracy on a
# dozen smoke images) can still move by one image when a float difference flips an argmax at a
# near tie; such a line names the cell, and a person judges it. TF32 is switched off for the
# CUDA run (run_environment in tests/gpu/device_runs.py): with it, convolutions keep 10
# mantissa bits, a precision choice rather than a port error.
FLOAT = Tolerance("float", rtol=1e-3, atol=1e-4)
# A cell computed from a random stream drawn on the job's device: torch's CUDA generator
# seeded with s is a different stream from the CPU generator seeded with s, so the CUDA record
# holds another Monte Carlo draw (2 to 100 draws at smoke scale) or a network trained with
# other dropout masks / noise. The gap is the spread of the estimator, which no float
# tolerance bounds and which at these sample sizes is as large as the values themselves, so
# any bound would be a guess; these cells are checked for presence only, and their gaps are
# listed (``Comparison.unchecked``) for a person to read.
RANDOM_STREAM = Tolerance("random stream", rtol=None)
# Wall-clock seconds differ between devices by design.
TIMING = Tolerance("timing", rtol=None)


@dataclass(frozen=True)
class ToleranceRule:
    """``tolerance`` for the cells whose experiment, row and column match these glob patterns,
    and ``why`` (the code that makes it so)."""

    experiment: str
    row: str
    column: str
    tolerance: Tolerance
    why: str

    def matches(self, experiment: str, row: str, column: str) -> bool:
        """Whether the three patterns match."""
        return (fnmatchcase(experiment, self.experiment) and fnmatchcase(row, self.row)
                and fnmatchcase(column, self.column))


_DROPOUT = ("the WRN MAP network trains with dropout 0.3, whose masks come from the global RNG "
            "of the job's device (bench/training/classifier.py); every row is built on it or "
            "on its own stochastic training")
_TEMPERED = ("posterior draws from a generator on the job's device "
             "(bench/methods/laplace/tempered.py)")
# Read from the code (no GPU has run these yet): the cells whose computation draws from a
# random stream on the job's device. The first matching rule wins.
RULES: tuple[ToleranceRule, ...] = (
    ToleranceRule("laplace_redux/table-2", "*", "pred_time", TIMING,
                  "seconds per prediction (bench/tasks/hessian_structures.py)"),
    ToleranceRule("laplace_redux/table-2", "*", "*", RANDOM_STREAM,
                  "the MC link's draws come from a generator on the job's device "
                  "(bench/methods/laplace/classification.py, laplace_predictive)"),
    ToleranceRule("laplace_redux/table-4", "*", "*", RANDOM_STREAM, _DROPOUT),
    ToleranceRule("laplace_redux/figure-9-cifar10c", "*", "*", RANDOM_STREAM, _DROPOUT),
    ToleranceRule("laplace_redux/*", "*BBB*", "*", RANDOM_STREAM,
                  "flipout weight noise from the global RNG of the job's device "
                  "(bench/methods/baselines/bayes_by_backprop.py)"),
    ToleranceRule("laplace_redux/*", "*CSGHMC*", "*", RANDOM_STREAM,
                  "SGHMC noise from a generator on the job's device "
                  "(bench/methods/baselines/cyclical_sghmc.py)"),
    ToleranceRule("laplace_redux/*", "*SWAG*", "*", RANDOM_STREAM,
                  "SWAG draws from a generator on the job's device "
                  "(bench/methods/baselines/swag.py)"),
    ToleranceRule("laplace_redux/figure-10", "*/LA", "*", RANDOM_STREAM,
                  "the GLM predictive's draws come from a generator on the job's device "
                  "(bench/methods/laplace/last_layer_checkpoint.py)"),
    ToleranceRule("generalized_laplace/figure-2", "*", "*", RANDOM_STREAM, _TEMPERED),
    ToleranceRule("generalized_laplace/*", "*", "*@T=*", RANDOM_STREAM, _TEMPERED),
)


def tolerance_for(experiment: str, row: str, column: str,
                  rules: Sequence[ToleranceRule] = RULES) -> tuple[Tolerance, str]:
    """The tolerance of one cell and the reason of the rule that set it ("" for the default)."""
    for rule in rules:
        if rule.matches(experiment, row, column):
            return rule.tolerance, rule.why
    return FLOAT, ""


def without_device(value: Any) -> Any:
    """``value`` (a config) with every key named ``device`` removed, at any depth."""
    if isinstance(value, dict):
        return {k: without_device(v) for k, v in value.items() if k != "device"}
    if isinstance(value, list):
        return [without_device(v) for v in value]
    return value


def pairing_key(record: dict[str, Any]) -> str:
    """The hash of the record's config without its device keys."""
    return config_hash(without_device(record["config"]))


def record_label(record: dict[str, Any]) -> str:
    """Which job a record is, in a few words."""
    parts = [f"{key}={record.get(key)}" for key in ("dataset", "method", "variant", "protocol",
                                                    "seed")]
    return "[" + " ".join(parts) + "]"


def _values(record: dict[str, Any]) -> dict[tuple[str, str], list[float | None]]:
    values: dict[tuple[str, str], list[float | None]] = {}
    for cell in record.get("cells") or []:
        values.setdefault((cell["row"], cell["column"]), []).append(cell["value"])
    for name, value in (record.get("metrics") or {}).items():
        values.setdefault((METRICS_ROW, name), []).append(value)
    return values


def _failed_cells(record: dict[str, Any]) -> set[tuple[str, str]]:
    return {(c.get("row", ""), c.get("column", "")) for c in record.get("failed_cells") or []}


def _error_line(record: dict[str, Any]) -> str:
    text = record.get("error") or record.get("traceback") or ""
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no error recorded"


def _short(value: float | None) -> str:
    return "missing" if value is None else f"{value:.10g}"


@dataclass
class Comparison:
    """What :func:`compare_records` found: ``problems`` (one line each; empty when the records
    agree), ``unchecked`` (cells whose values a rule leaves uncompared, with both values),
    and counts of the record pairs and of the values compared."""

    experiment: str
    devices: tuple[str, str]
    pairs: int = 0
    compared: int = 0
    problems: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)

    def report(self, limit: int = 40) -> str:
        """The problems, at most ``limit`` lines, and how many were left out."""
        shown = self.problems[:limit]
        more = len(self.problems) - len(shown)
        head = (f"{self.experiment}: {len(self.problems)} difference(s) between the "
                f"{self.devices[0]} and {self.devices[1]} records ({self.pairs} record pairs, "
                f"{self.compared} values compared)")
        return "\n".join([head, *shown] + ([f"... and {more} more"] if more > 0 else []))


def _index(records: Iterable[dict[str, Any]], device: str, experiment: str,
           problems: list[str]) -> dict[str, dict[str, Any]]:
    indexed: dict[str, dict[str, Any]] = {}
    for record in records:
        key = pairing_key(record)
        if key in indexed:
            problems.append(f"{experiment} {record_label(record)}: two {device} records share a "
                            "config once the device keys are removed; they cannot be paired")
            continue
        indexed[key] = record
    return indexed


def compare_records(experiment: str, reference: Iterable[dict[str, Any]],
                    candidate: Iterable[dict[str, Any]], devices: tuple[str, str] = ("cpu", "cuda"),
                    rules: Sequence[ToleranceRule] = RULES) -> Comparison:
    """Compare the ``candidate`` records (run on ``devices[1]``) of ``experiment`` with the
    ``reference`` records (run on ``devices[0]``); see the module docstring."""
    first, second = devices
    result = Comparison(experiment, devices)
    problems = result.problems
    left = _index(reference, first, experiment, problems)
    right = _index(candidate, second, experiment, problems)
    if not left:
        problems.append(f"{experiment}: the {first} run wrote no records")
    for key in sorted(left.keys() - right.keys()):
        problems.append(f"{experiment} {record_label(left[key])}: no {second} record")
    for key in sorted(right.keys() - left.keys()):
        problems.append(f"{experiment} {record_label(right[key])}: no {first} record")
    for key in sorted(left.keys() & right.keys()):
        result.pairs += 1
        _compare_pair(experiment, left[key], right[key], devices, rules, result)
    return result


def _compare_pair(experiment: str, reference: dict[str, Any], candidate: dict[str, Any],
                  devices: tuple[str, str], rules: Sequence[ToleranceRule],
                  result: Comparison) -> None:
    first, second = devices
    where = f"{experiment} {record_label(reference)}"
    statuses = {first: reference["status"], second: candidate["status"]}
    failed = [f"{device}: {_error_line(record)}" for device, record
              in ((first, reference), (second, candidate)) if record["status"] != "ok"]
    if failed:
        result.problems.append(f"{where}: status {first}={statuses[first]} "
                               f"{second}={statuses[second]} ({'; '.join(failed)})")
        return
    ours_failed, theirs_failed = _failed_cells(reference), _failed_cells(candidate)
    for label, cells in ((f"only on {first}", ours_failed - theirs_failed),
                         (f"only on {second}", theirs_failed - ours_failed)):
        for row, column in sorted(cells):
            result.problems.append(f"{where}: cell ({row}, {column}) failed {label}")
    ours, theirs = _values(reference), _values(candidate)
    for row, column in sorted(ours.keys() - theirs.keys()):
        result.problems.append(f"{where}: cell ({row}, {column}) only on {first}: "
                               f"{first}={_short(ours[(row, column)][0])}")
    for row, column in sorted(theirs.keys() - ours.keys()):
        result.problems.append(f"{where}: cell ({row}, {column}) only on {second}: "
                               f"{second}={_short(theirs[(row, column)][0])}")
    for row, column in sorted(ours.keys() & theirs.keys()):
        a, b = ours[(row, column)], theirs[(row, column)]
        if len(a) != len(b):
            result.problems.append(f"{where}: cell ({row}, {column}) appears {len(a)} time(s) "
                                   f"on {first}, {len(b)} on {second}")
            continue
        tolerance, why = tolerance_for(experiment, row, column, rules)
        for x, y in zip(a, b, strict=True):
            if not tolerance.accepts(x, y):
                gap = "" if x is None or y is None else f", |diff| {abs(y - x):.3g}"
                result.problems.append(f"{where}: cell ({row}, {column}): {first}={_short(x)} "
                                       f"{second}={_short(y)}{gap} > {tolerance.describe()}")
            elif tolerance.rtol is None:
                if x != y:
                    result.unchecked.append(f"{where}: cell ({row}, {column}): {first}="
                                            f"{_short(x)} {second}={_short(y)} ({tolerance.name}"
                                            f"{': ' + why if why else ''})")
            else:
                result.compared += 1
