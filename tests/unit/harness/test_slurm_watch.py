"""The Slurm submitter's lines (bench.harness.slurm_watch) on made-up snapshots of job states:
a line per start, requeue and end, a pending line with Slurm's reason at most every few
minutes (sooner when the reason changes), and the summary."""

from __future__ import annotations

from bench.harness.slurm_watch import SlurmWatch, WatchedJob, plain_state


def two_jobs(note_s: float = 60.0, repeat_s: float = 180.0) -> SlurmWatch:
    return SlurmWatch([WatchedJob("7_0", "#0 seed=0", "/logs/7_0.out"),
                       WatchedJob("7_1", "#1 seed=1", "/logs/7_1.out")], note_s, repeat_s)


def test_a_start_and_a_requeue_have_a_line_each_and_unknown_states_none():
    watch = two_jobs()
    assert watch.update({"7_0": "UNKNOWN"}, {}, 0.0) == []
    assert watch.update({"7_0": "RUNNING"}, {}, 5.0) == [
        "slurm job 7_0 running: #0 seed=0; log /logs/7_0.out"]
    # A time-out that submitit requeues: no end line for TIMEOUT, one for the requeue.
    assert watch.update({"7_0": "TIMEOUT"}, {}, 10.0) == []
    assert watch.update({"7_0": "PENDING"}, {}, 15.0) == [
        "slurm job 7_0 requeued (was TIMEOUT): #0 seed=0; it resumes from its checkpoints"]
    # Slurm's own requeue: REQUEUED, then PENDING, is one requeue line.
    assert watch.update({"7_0": "RUNNING"}, {}, 20.0) == [
        "slurm job 7_0 running again (attempt 2): #0 seed=0; log /logs/7_0.out"]
    assert watch.update({"7_0": "REQUEUED"}, {}, 25.0) == [
        "slurm job 7_0 requeued (was RUNNING): #0 seed=0; it resumes from its checkpoints"]
    assert watch.update({"7_0": "PENDING"}, {}, 30.0) == []
    assert watch.update({"7_0": "RUNNING"}, {}, 35.0) == [
        "slurm job 7_0 running again (attempt 3): #0 seed=0; log /logs/7_0.out"]


def test_pending_jobs_get_one_line_with_the_reason_then_again_only_later_or_on_change():
    watch = two_jobs(note_s=60.0, repeat_s=180.0)
    drained = "(ReqNodeNotAvail, UnavailableNodes:node1)"
    states = {"7_0": "PENDING", "7_1": "PENDING"}
    assert watch.update(states, {"7_0": drained, "7_1": drained}, 0.0) == []
    assert watch.update(states, {"7_0": drained, "7_1": drained}, 59.0) == []
    assert watch.update(states, {"7_0": drained, "7_1": drained}, 61.0) == [
        f"slurm: 2 job(s) pending for up to 1:01 (7_0, 7_1); Slurm's reason: {drained}"]
    assert watch.update(states, {"7_0": drained, "7_1": drained}, 200.0) == []
    assert watch.update(states, {"7_0": "(Resources)", "7_1": "(Resources)"}, 205.0) == [
        "slurm: 2 job(s) pending for up to 3:25 (7_0, 7_1); Slurm's reason: (Resources)"]
    assert watch.update(states, {"7_0": "(Resources)", "7_1": "(Resources)"}, 386.0) == [
        "slurm: 2 job(s) pending for up to 6:26 (7_0, 7_1); Slurm's reason: (Resources)"]


def test_a_job_the_queue_no_longer_lists_as_pending_is_left_out_of_the_pending_line():
    watch = two_jobs(note_s=0.0)
    states = {"7_0": "PENDING", "7_1": "PENDING"}
    assert watch.update(states, {"7_1": "(Priority)"}, 1.0) == [
        "slurm: 1 job(s) pending for up to 0:00 (7_1); Slurm's reason: (Priority)"]
    assert watch.update(states, {}, 400.0) == []
    assert watch.update(states, None, 800.0) == [  # the queue could not be read
        "slurm: 2 job(s) pending for up to 13:19 (7_0, 7_1); Slurm's reason: no reason given"]


def test_ended_jobs_have_their_state_outcome_and_log_and_the_summary_counts_them():
    watch = two_jobs()
    watch.update({"7_0": "RUNNING", "7_1": "RUNNING"}, {}, 1.0)
    first = watch.ended_line(watch.jobs[0], "COMPLETED", "record ok")
    second = watch.ended_line(watch.jobs[1], "CANCELLED by 0",
                              "no record: UncompletedJobError: job 7_1 was cancelled")
    assert first == "slurm job 7_0 completed (record ok): #0 seed=0; log /logs/7_0.out"
    assert second == ("slurm job 7_1 cancelled (no record: UncompletedJobError: job 7_1 was "
                      "cancelled): #1 seed=1; log /logs/7_1.out")
    # An ended job gets no more lines, whatever Slurm says of it later.
    assert watch.update({"7_0": "PENDING", "7_1": "PENDING"}, {}, 500.0) == []
    assert watch.summary_line() == ("slurm: 2 job(s) ended: 1 cancelled, 1 completed "
                                    "(records: 1 no record, 1 ok)")


def test_slurm_states_are_read_by_their_first_word():
    assert plain_state("CANCELLED by 0") == "CANCELLED"
    assert plain_state("") == "UNKNOWN"
    assert plain_state("running") == "RUNNING"
