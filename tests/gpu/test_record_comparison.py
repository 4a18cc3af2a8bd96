"""The GPU tier's machinery, checked on the CPU (no GPU needed): the record comparison on
made-up records and on one real smoke artifact run twice through the tier's own runner, and the
data root it builds."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from tests.gpu.data_root import IMAGE_NEEDS, DataRoot, build_data_root, smoke_corruptions
from tests.gpu.device_runs import TierRun, reproduce_command, run_pair, tier_runs
from tests.gpu.record_comparison import (
    FLOAT,
    RANDOM_STREAM,
    RULES,
    TIMING,
    ToleranceRule,
    compare_records,
    pairing_key,
    tolerance_for,
)

EXPERIMENT = "demo/table-1"
CELLS = {("LA", "nll"): 0.6931471805599453, ("LA", "acc"): 87.5, ("MAP", "nll"): 1.25,
         ("MAP", "acc"): 0.0}


def record(device: str, cells=None, *, seed: int = 0, status: str = "ok", metrics=None,
           failed_cells=()) -> dict:
    """A record as the harness writes it, reduced to what the comparison reads; the device
    appears at the top and in nested nodes as the composed configs have it."""
    config = {"name": EXPERIMENT, "seed": seed, "device": device, "results_dir": f"/tmp/{device}",
              "method": {"name": "la", "device": device},
              "dataset": {"name": "toy", "device": device, "sizes": [1, 2]}}
    cells = CELLS if cells is None else cells
    return {"config": config, "status": status, "dataset": "toy", "method": "la",
            "variant": "v", "protocol": "paper", "seed": seed,
            "cells": [{"row": r, "column": c, "value": v} for (r, c), v in cells.items()],
            "metrics": dict(metrics or {}), "failed_cells": [dict(c) for c in failed_cells],
            "error": "RuntimeError: out of memory" if status == "failed" else None}


def runs(device: str, seeds=(0, 1), **changes) -> list[dict]:
    return [record(device, seed=seed, **changes) for seed in seeds]


def nudged(cells: dict, relative: float) -> dict:
    return {key: value * (1 + relative) for key, value in cells.items()}


def test_records_pair_across_devices_and_float_noise_passes():
    cpu = runs("cpu", metrics={"map_test_accuracy": 0.5})
    cuda = runs("cuda", cells=nudged(CELLS, 3e-6), metrics={"map_test_accuracy": 0.5 + 1e-9})
    assert pairing_key(cpu[0]) == pairing_key(cuda[0]) != pairing_key(cpu[1])
    comparison = compare_records(EXPERIMENT, cpu, cuda)
    assert comparison.problems == [] and comparison.unchecked == []
    assert comparison.pairs == 2 and comparison.compared == 2 * (len(CELLS) + 1)


def test_a_value_beyond_the_tolerance_fails_naming_the_cell_and_both_values():
    cells = dict(CELLS)
    cells[("LA", "nll")] = 0.70
    comparison = compare_records(EXPERIMENT, runs("cpu", seeds=(0,)), runs("cuda", cells=cells,
                                                                            seeds=(0,)))
    assert len(comparison.problems) == 1
    line = comparison.problems[0]
    for text in (EXPERIMENT, "seed=0", "cell (LA, nll)", "cpu=0.6931471806", "cuda=0.7",
                 "|diff| 0.00685", FLOAT.describe()):
        assert text in line, (text, line)
    assert comparison.report().startswith(f"{EXPERIMENT}: 1 difference(s) between the cpu and "
                                          "cuda records (1 record pairs, 3 values compared)")


def test_an_absolute_tolerance_covers_cells_near_zero():
    cells = dict(CELLS)
    cells[("MAP", "acc")] = 5e-5
    assert compare_records(EXPERIMENT, runs("cpu"), runs("cuda", cells=cells)).problems == []
    cells[("MAP", "acc")] = 5e-4
    problems = compare_records(EXPERIMENT, runs("cpu"), runs("cuda", cells=cells)).problems
    assert len(problems) == 2 and all("cell (MAP, acc)" in p for p in problems)


def test_missing_cells_records_and_failed_jobs_are_reported():
    fewer = {k: v for k, v in CELLS.items() if k != ("MAP", "acc")}
    more = {**CELLS, ("DE", "nll"): 2.0}
    problems = compare_records(EXPERIMENT, runs("cpu", cells=more, seeds=(0,)),
                               runs("cuda", cells=fewer, seeds=(0,))).problems
    assert problems == [
        f"{EXPERIMENT} [dataset=toy method=la variant=v protocol=paper seed=0]: cell (DE, nll) "
        "only on cpu: cpu=2",
        f"{EXPERIMENT} [dataset=toy method=la variant=v protocol=paper seed=0]: cell (MAP, acc) "
        "only on cpu: cpu=0"]
    problems = compare_records(EXPERIMENT, runs("cpu", seeds=(0, 1)),
                               runs("cuda", seeds=(0, 2))).problems
    assert [p.split(": ", 1)[1] for p in problems] == ["no cuda record", "no cpu record"]
    assert "seed=1" in problems[0] and "seed=2" in problems[1]
    failed = compare_records(EXPERIMENT, runs("cpu"), runs("cuda", status="failed")).problems
    assert len(failed) == 2 and "status cpu=ok cuda=failed (cuda: RuntimeError: out of memory)" \
        in failed[0]
    assert compare_records(EXPERIMENT, [], []).problems == [
        f"{EXPERIMENT}: the cpu run wrote no records"]
    one_failed_cell = [{"row": "LA", "column": "ece", "reason": "overflow"}]
    problems = compare_records(EXPERIMENT, runs("cpu", seeds=(0,)),
                               runs("cuda", seeds=(0,), failed_cells=one_failed_cell)).problems
    assert len(problems) == 1 and problems[0].endswith("cell (LA, ece) failed only on cuda")


def test_records_that_collapse_onto_one_config_are_reported():
    comparison = compare_records(EXPERIMENT, [record("cpu"), record("cuda")], [record("cuda")])
    shared = [p for p in comparison.problems if "share a config" in p]
    assert len(shared) == 1 and "two cpu records" in shared[0]


def test_a_random_stream_rule_compares_presence_only_and_lists_the_gaps():
    rules = (ToleranceRule("demo/*", "LA", "*", RANDOM_STREAM, "draws on the device"),)
    cells = nudged(CELLS, 0.3)
    comparison = compare_records(EXPERIMENT, runs("cpu", seeds=(0,)),
                                 runs("cuda", cells=cells, seeds=(0,)), rules=rules)
    assert [p for p in comparison.problems if "(LA," in p] == []
    assert len([p for p in comparison.problems if "(MAP, nll)" in p]) == 1
    assert len(comparison.unchecked) == 2
    assert "cell (LA, acc): cpu=87.5 cuda=113.75 (random stream: draws on the device)" in \
        comparison.unchecked[0]
    without = {k: v for k, v in CELLS.items() if k != ("LA", "nll")}
    problems = compare_records(EXPERIMENT, runs("cpu", seeds=(0,)),
                               runs("cuda", cells=without, seeds=(0,)), rules=rules).problems
    assert problems and "cell (LA, nll) only on cpu" in problems[0]


def test_the_rules_name_timings_and_device_streams_and_default_to_float():
    assert tolerance_for("laplace_redux/table-2", "LA/DIAG", "pred_time")[0] is TIMING
    assert tolerance_for("laplace_redux/table-2", "LA/DIAG", "test_acc")[0] is RANDOM_STREAM
    assert tolerance_for("laplace_redux/table-3", "BBB (KL summed)", "conf_kmnist")[0] \
        is RANDOM_STREAM
    assert tolerance_for("laplace_redux/table-3", "LA*", "conf_kmnist") == (FLOAT, "")
    assert tolerance_for("laplace_redux/figure-10", "fmow/LA", "id/nll")[0] is RANDOM_STREAM
    assert tolerance_for("laplace_redux/figure-10", "fmow/MAP", "id/nll")[0] is FLOAT
    assert tolerance_for("generalized_laplace/figure-4", "ResNet-18/CIFAR-10 KFAC",
                         "svhn/entropy@T=0.1")[0] is RANDOM_STREAM
    assert tolerance_for("ssla/table-7", "N(0,1)", "SSLA")[0] is FLOAT
    assert all(rule.why for rule in RULES)


@pytest.mark.second_tier
def test_every_implemented_experiment_and_side_run_is_a_tier_run():
    from bench.reporting.registry import (
        implemented_artifacts,
        results_experiment,
        side_run_configs,
    )

    configs = [run.config for run in tier_runs()]
    assert len(configs) == len(set(configs))
    experiments = {spec.experiment for spec in implemented_artifacts().values()}
    sides = {side for e in experiments for side in side_run_configs(e)}
    assert set(configs) == experiments | sides
    for run in tier_runs():
        assert run.experiment == results_experiment(run.config)
        assert (run.side_run_of is not None) == (run.config in sides)
    command = reproduce_command(TierRun("ssla/table-7", "ssla/table-7"), "/r", "cuda")
    assert command[1:] == ["-m", "bench.reproduce", "ssla/table-7", "--scale", "smoke",
                           "--no-report", "--no-side-runs", "--workers", "1", "results_dir=/r",
                           "device=cuda"]


@pytest.fixture(scope="module")
def table_7_twice(tmp_path_factory):
    """ssla/table-7 at smoke scale run twice on the CPU through the tier's own runner (the
    second run standing where the GPU run stands); it reads no data files."""
    folder = tmp_path_factory.mktemp("table-7-twice")
    empty = folder / "no-data"
    empty.mkdir()
    run = TierRun("ssla/table-7", "ssla/table-7")
    reference, candidate = run_pair(run, DataRoot(empty, empty), folder, "cpu", timeout_s=900)
    assert (reference.returncode, candidate.returncode) == (0, 0), candidate.log_tail()
    return reference.records(run.experiment), candidate.records(run.experiment)


@pytest.mark.second_tier
@pytest.mark.integration
def test_a_real_artifact_run_twice_agrees_and_a_perturbed_cell_is_named(table_7_twice):
    reference, candidate = table_7_twice
    assert len(reference) == len(candidate) == 2
    assert {r["config"]["results_dir"] for r in reference} != \
        {r["config"]["results_dir"] for r in candidate}
    comparison = compare_records("ssla/table-7", reference, candidate, ("cpu", "cpu"))
    assert comparison.problems == [] and comparison.pairs == 2
    assert comparison.compared == sum(len(r["cells"]) + len(r["metrics"]) for r in reference)
    perturbed = copy.deepcopy(candidate)
    cell = perturbed[1]["cells"][3]
    before = cell["value"]
    cell["value"] = before * 1.01
    problems = compare_records("ssla/table-7", reference, perturbed, ("cpu", "cuda")).problems
    assert len(problems) == 1
    assert f"cell ({cell['row']}, {cell['column']}): cpu={before:.10g} " \
           f"cuda={before * 1.01:.10g}" in problems[0]
    assert problems[0].startswith(f"ssla/table-7 [dataset={perturbed[1]['dataset']}")
    problems = compare_records("ssla/table-7", reference, perturbed[:1], ("cpu", "cuda")).problems
    assert len(problems) == 1 and problems[0].endswith("no cuda record")


@pytest.mark.second_tier
def test_the_data_root_links_real_files_and_generates_the_rest(tmp_path):
    from bench.datasets.uci_raw import UCI_SOURCES
    from bench.datasets.vision import find_image_files
    from bench.datasets.wilds_layout import data_folder, missing_files
    from tests.unit.datasets.image_fixtures import write_mnist_like
    from tests.wilds_fixtures import CHECKPOINTS, VERSIONS, WRITERS

    source = tmp_path / "real"
    write_mnist_like(source / "mnist", np.random.default_rng(1), sizes=(20, 30))
    root = build_data_root(tmp_path / "tier", source)
    data = root.data_dir
    for name, splits in IMAGE_NEEDS.items():
        for split in splits:
            assert find_image_files(name, split, data) is not None, (name, split)
    for corruption in smoke_corruptions():
        assert find_image_files("cifar10_c", "test", data, corruption=corruption,
                                severity=1) is not None
    linked = data / "mnist" / "t10k-images-idx3-ubyte.gz"
    assert linked.is_symlink() and linked.resolve() == (source / "mnist" / linked.name).resolve()
    assert root.origins["mnist/test"] == f"linked from {source}"
    assert root.origins["kmnist/test"] == "generated"
    generated = data / "fashion_mnist" / "t10k-images-idx3-ubyte.gz"
    assert generated.is_symlink() and (tmp_path / "tier" / "generated") in \
        generated.resolve().parents
    for name in ("daily_demand", "real_estate"):
        uci = UCI_SOURCES[name]
        assert all((uci.directory(data) / f).is_file() for f in uci.files)
    for name in WRITERS:
        assert missing_files(data, name, VERSIONS[name]) == []
        assert data_folder(data, name, VERSIONS[name]).is_dir()
        assert len(list((root.wilds_checkpoints / name).glob("*.pth"))) == len(CHECKPOINTS[name])
    assert json.loads((tmp_path / "tier" / "origins.json").read_text()) == root.origins
    assert root.environment() == {"BENCH_DATA_DIR": str(data),
                                  "BENCH_WILDS_CHECKPOINTS": str(root.wilds_checkpoints)}
