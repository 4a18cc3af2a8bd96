"""The GPU-fit timer: warm-up, medians, and CUDA synchronisation only when CUDA is in use."""

from __future__ import annotations

import math
import time

import pytest
import torch

from bench.harness import timing
from bench.harness.timing import Stopwatch, timed


@pytest.fixture
def cuda_calls(monkeypatch):
    """Record every torch.cuda.synchronize call; CUDA counts as never initialised."""
    calls = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: calls.append(args))
    return calls


def test_timed_runs_warmup_plus_repeats_and_returns_a_positive_median(cuda_calls):
    counter = []

    def work():
        counter.append(1)
        time.sleep(0.002)
        return len(counter)

    seconds, result = timed(work, repeats=3, warmup=2)
    assert len(counter) == 2 + 3
    assert result == 5
    assert 0.0015 < seconds < 1.0
    assert cuda_calls == []  # on CPU no CUDA call is made


def test_timed_median_ignores_one_slow_call():
    delays = iter([0.0, 0.2, 0.0, 0.0])
    seconds, _ = timed(lambda: time.sleep(next(delays)), repeats=3, warmup=1)
    assert seconds < 0.1


@pytest.mark.parametrize("repeats, warmup", [(0, 1), (1, -1)])
def test_timed_rejects_empty_measurements(repeats, warmup):
    with pytest.raises(ValueError, match="repeats >= 1"):
        timed(lambda: None, repeats=repeats, warmup=warmup)


def test_stopwatch_as_block_and_as_running_clock(cuda_calls):
    with Stopwatch() as watch:
        assert math.isnan(watch.seconds)
        time.sleep(0.002)
    assert watch.seconds >= 0.0015
    running = Stopwatch()
    first = running.elapsed()
    assert 0 <= first <= running.elapsed()
    assert cuda_calls == []


def test_stopwatch_records_the_time_of_a_block_that_raises():
    watch = Stopwatch()
    with pytest.raises(RuntimeError), watch:
        raise RuntimeError("boom")
    assert watch.seconds >= 0


def test_cuda_work_is_waited_for_before_every_clock_read(monkeypatch):
    events = []
    clock = time.perf_counter
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: events.append("sync"))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: events.append("clock") or clock())
    with Stopwatch():
        events.append("work")
    timed(lambda: events.append("work"), repeats=2, warmup=1)
    reads = [i for i, event in enumerate(events) if event == "clock"]
    assert len(reads) == 2 + 2 * 2
    assert all(events[i - 1] == "sync" for i in reads)
    assert events.index("work") > reads[0] and events[-1] == "clock"
