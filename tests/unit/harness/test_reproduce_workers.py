"""Parallel per-seed multiruns of ``bench.reproduce``: splitting, environment, exit status."""

from __future__ import annotations

import sys

import pytest

from bench.cli import reproduce_command as reproduce


def test_split_by_seed_gives_one_multirun_per_seed():
    overrides = ["experiment=x", "scale=cpu", "seed=6,12,13", "method=a,b"]
    assert reproduce.split_by_seed(overrides) == [
        ["experiment=x", "scale=cpu", "seed=6", "method=a,b"],
        ["experiment=x", "scale=cpu", "seed=12", "method=a,b"],
        ["experiment=x", "scale=cpu", "seed=13", "method=a,b"],
    ]
    assert reproduce.split_by_seed(["experiment=x", "method=a,b"]) == [["experiment=x",
                                                                         "method=a,b"]]


@pytest.mark.parametrize("sweep", ["seed=range(0,3)", "seed=choice(0,1,2)", "seed=0,1,2"])
def test_a_seed_sweep_in_any_hydra_spelling_splits_by_its_values(sweep):
    """range(0,3) was cut at its comma into seed=range(0 and seed=3) (a 36-line traceback)."""
    assert reproduce.split_by_seed(["experiment=x", sweep, "method=a,b"]) == [
        ["experiment=x", f"seed={seed}", "method=a,b"] for seed in (0, 1, 2)]


def test_workers_share_the_cores_as_torch_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(reproduce, "available_cores", lambda: 8)
    assert reproduce.worker_environment(4)["OMP_NUM_THREADS"] == "2"
    assert reproduce.worker_environment(16)["OMP_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in reproduce.worker_environment(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert reproduce.worker_environment(4)["OMP_NUM_THREADS"] == "3"


def _exits(code: int) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.exit({code})"]


@pytest.mark.parametrize(("codes", "expected"), [([0, 0, 0], 0), ([0, 1, 0], 1),
                                                 ([1, 3, 0], 3), ([0, 0, 2], 2)])
@pytest.mark.second_tier
def test_run_commands_combines_exit_statuses(codes, expected):
    assert reproduce.run_commands([_exits(code) for code in codes], workers=2) == expected


@pytest.mark.second_tier  # five interpreters started as command lines
def test_run_commands_runs_every_command(tmp_path):
    commands = [[sys.executable, "-c", f"open(r'{tmp_path}/{k}', 'w').close()"]
                for k in range(5)]
    assert reproduce.run_commands(commands, workers=3) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [str(k) for k in range(5)]


def test_dry_run_prints_one_multirun_per_seed_with_workers(capsys):
    assert reproduce.main(["ssla/table-1", "--scale", "cpu", "--dry-run", "--workers", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("seed=")[1].split()[0] for line in lines] == [str(s) for s in range(6)]


def test_non_positive_workers_is_a_config_error(capsys):
    assert reproduce.main(["ssla/table-1", "--scale", "cpu", "--dry-run", "--workers", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--workers" in err[0]


@pytest.mark.second_tier
def test_an_experiments_side_runs_follow_its_own_jobs_unless_left_out(capsys):
    assert reproduce.main(["laplace_redux/table-3", "--scale", "cpu", "--dry-run",
                           "--workers", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[3] for line in lines] == ["experiment=laplace_redux/table-3",
                                                   "experiment=laplace_redux/table-3-side-runs"]
    assert lines[1].endswith("seed=6 method=bayes_by_backprop_kl_sum,cyclical_sghmc_code_counter")
    assert reproduce.main(["laplace_redux/table-3", "--scale", "cpu", "--dry-run",
                           "--workers", "1", "--no-side-runs"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1


def test_a_command_narrowed_to_other_methods_or_seeds_skips_the_side_runs(capsys):
    assert reproduce.main(["laplace_redux/table-3", "--scale", "smoke", "--dry-run",
                           "--workers", "1", "method=map_classifier"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 1
    assert "note: side run laplace_redux/table-3-side-runs skipped: method on the command " \
        "line" in captured.err
    assert reproduce.narrowing_overrides("laplace_redux/table-2-budget",
                                         ["seed=711", "device=cpu"]) == ["seed"]


def test_a_seed_short_of_workers_is_split_by_its_first_other_sweep_key():
    overrides = ["experiment=x", "scale=cpu", "seed=6", "dataset=a,b", "link=mc,probit"]
    assert reproduce.split_for_workers([overrides], workers=2) == [
        ["experiment=x", "scale=cpu", "seed=6", "dataset=a", "link=mc,probit"],
        ["experiment=x", "scale=cpu", "seed=6", "dataset=b", "link=mc,probit"],
    ]


def test_the_parts_of_several_seeds_come_value_by_value():
    overrides = ["experiment=x", "seed=0,1", "posterior=p,q,r", "prior=1,2"]
    parts = reproduce.split_for_workers([overrides], workers=2)
    assert [(part[1], part[2]) for part in parts] == [
        ("seed=0", "posterior=p"), ("seed=1", "posterior=p"), ("seed=0", "posterior=q"),
        ("seed=1", "posterior=q"), ("seed=0", "posterior=r"), ("seed=1", "posterior=r")]
    assert all(part[3] == "prior=1,2" for part in parts)


def test_the_methods_of_a_seed_stay_in_one_multirun_in_order():
    overrides = ["experiment=x", "seed=6", "method=map,la,de"]
    assert reproduce.split_for_workers([overrides], workers=2) == [overrides]


def test_enough_seeds_for_every_worker_are_not_split_further():
    overrides = ["experiment=x", "seed=0,1,2,3", "dataset=a,b"]
    assert reproduce.split_for_workers([overrides], workers=2) == reproduce.split_by_seed(
        overrides)


def test_a_one_seed_grid_runs_on_every_core(capsys):
    assert reproduce.main(["laplace_redux/figure-8-mnist", "--scale", "cpu", "--dry-run",
                           "--workers", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("dataset=")[1].split()[0] for line in lines] == ["mnist",
                                                                        "fashion_mnist"]


def test_pinned_arithmetic_is_handed_to_the_multiruns_it_starts(monkeypatch, capsys):
    """Called with arguments (not from the command line), ``--pinned-arithmetic`` cannot pin
    this process from its start, so it sets the variables its multiruns start with."""
    from bench.harness.arithmetic import PINNED_ARITHMETIC

    for name in PINNED_ARITHMETIC:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert reproduce.main(["ssla/table-2", "--scale", "cpu", "--dry-run",
                           "--pinned-arithmetic"]) == 0
    assert {name: reproduce.os.environ.get(name) for name in PINNED_ARITHMETIC} == \
        PINNED_ARITHMETIC
