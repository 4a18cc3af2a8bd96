"""SlurmRequestCheck: a Slurm multirun asking for more than any node has is one line.
Made-up ``sinfo`` output; no Slurm needed."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from bench.harness.multirun_progress import gres_gpus, parse_sinfo, request_problem

SINFO = """cpu*|2|24105|(null)
cpu*|8|64000|(null)
gpu|32|256000|gpu:a100:4(S:0-1)
gpu|32|256000|gpu:2,shard:8
"""


def request(**keys):
    base = {"partition": None, "cpus_per_task": 1, "tasks_per_node": 1, "mem_gb": 4,
            "gpus_per_node": 0, "gpus_per_task": None, "gres": None}
    return OmegaConf.create({**base, **keys})


@pytest.mark.parametrize("gres, gpus", [("(null)", 0), ("gpu:4", 4), ("gpu:a100:2(S:0,1)", 2),
                                        ("gpu:1,gpu:v100:2", 3), ("shard:8", 0)])
def test_gpus_are_counted_from_the_gres_field(gres, gpus):
    assert gres_gpus(gres) == gpus


def test_sinfo_rows_become_nodes_with_the_default_partition_marked():
    nodes = parse_sinfo(SINFO)
    assert [(n.partition, n.default, n.cpus, n.memory_mb, n.gpus) for n in nodes] == [
        ("cpu", True, 2, 24105, 0), ("cpu", True, 8, 64000, 0), ("gpu", False, 32, 256000, 4),
        ("gpu", False, 32, 256000, 2)]


@pytest.mark.parametrize("keys", [{}, {"cpus_per_task": 8, "mem_gb": 60},
                                  {"partition": "gpu", "gpus_per_node": 4},
                                  {"partition": "cpu,gpu", "gres": "gpu:2"}])
def test_a_request_some_node_can_hold_passes(keys):
    assert request_problem(request(**keys), parse_sinfo(SINFO), "slurm") is None


@pytest.mark.parametrize("keys, names", [
    ({"gpus_per_node": 1}, ["1 GPU(s)", "no node of the default partition has one",
                            "BENCH_SLURM_PARTITION", "hydra/launcher=slurm"]),
    ({"partition": "gpu", "gpus_per_node": 8}, ["8 GPU(s)", "largest node of partition gpu has 4"]),
    ({"cpus_per_task": 4, "tasks_per_node": 4}, ["16 CPUs", "has 8", "BENCH_SLURM_CPUS"]),
    ({"mem_gb": 100}, ["100 GB", "62.5 GB", "BENCH_SLURM_MEM_GB", "at most 62"]),
    ({"partition": "big"}, ["no node in partition big", "cpu, gpu"]),
])
def test_a_request_no_node_can_hold_is_one_line_naming_the_setting(keys, names):
    problem = request_problem(request(**keys), parse_sinfo(SINFO), "slurm_gpu")
    assert problem is not None and "\n" not in problem
    for name in names:
        assert name in problem


def test_cpus_and_memory_on_different_nodes_do_not_add_up():
    nodes = parse_sinfo("p*|16|8000|(null)\np*|2|64000|(null)\n")
    problem = request_problem(request(cpus_per_task=16, mem_gb=32), nodes, "slurm")
    assert "no single node of the default partition has all of them" in problem


def test_a_partition_whose_nodes_are_all_drained_or_down_is_refused():
    """A draining node let an array pend 90 s ('Nodes required for job are DOWN, DRAINED')
    while the submitter printed nothing."""
    nodes = parse_sinfo("cpu*|2|24105|(null)|drain\ncpu*|8|64000|(null)|down*\n"
                        "gpu|32|256000|gpu:4|idle\n")
    assert [node.usable for node in nodes] == [False, False, True]
    problem = request_problem(request(), nodes, "slurm")
    assert problem == ("every node of the default partition is down or drained (sinfo states: "
                       "down*, drain): jobs would pend until an administrator resumes one; "
                       "choose another partition (BENCH_SLURM_PARTITION)")
    mixed = parse_sinfo("cpu*|2|24105|(null)|drng\ncpu*|8|64000|(null)|mix\n")
    assert request_problem(request(cpus_per_task=8), mixed, "slurm") is None
    assert "largest node of the default partition has 8" in request_problem(
        request(cpus_per_task=16), mixed, "slurm")


def test_a_partition_that_is_down_is_refused_though_its_nodes_are_idle():
    """sinfo's %a: a partition set down accepts jobs that then pend for ever."""
    nodes = parse_sinfo("cpu*|2|24105|(null)|idle|down\ngpu|32|256000|gpu:4|idle|up\n")
    assert [node.usable for node in nodes] == [False, True]
    assert request_problem(request(), nodes, "slurm") == (
        "the default partition is not up (sinfo availability: down): jobs would pend or be "
        "refused until an administrator sets it up; choose another partition "
        "(BENCH_SLURM_PARTITION)")
    assert request_problem(request(partition="gpu"), nodes, "slurm") is None


def test_cuda_jobs_on_a_launcher_without_gpus_are_refused_before_submission():
    from bench.harness.multirun_progress import device_problem

    assert device_problem("cuda", request(), "slurm") == (
        "device=cuda needs a GPU per job but hydra/launcher=slurm asks for none; use "
        "hydra/launcher=slurm_gpu (or set BENCH_SLURM_GPUS), or device=cpu")
    assert device_problem("cuda", request(gpus_per_node=1), "slurm_gpu") is None
    assert device_problem("cpu", request(), "slurm") is None
