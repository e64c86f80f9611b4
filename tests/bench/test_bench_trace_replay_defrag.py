"""Moves in the replay (issue 48, ``--defrag``): one VC of two 8-GPU nodes; four 4-GPU jobs
fill them two by two, the short one on each node ends, and an 8-GPU job comes while 8 GPUs
are free, 4 on each node. Off, it waits for a long job to end; on, a long job that
checkpoints moves beside the other, the 8-GPU job starts within minutes, and the mover runs
again at once, losing at most the work since its last checkpoint, counted as a move's."""

from bench.replay.metrics import json_line, summarize

from .test_bench_trace_replay_checkpoints import HOUR, job, records, replayed

LONG = 10 * HOUR


def world():
    return [
        job(1, 0, "a", 4, LONG),
        job(2, 1, "a", 4, 600),
        job(3, 2, "a", 4, 600),
        job(4, 3, "a", 4, LONG),
        job(5, 2 * HOUR + 120, "a", 8, 600),  # the long jobs are about 2 min past their 2 h checkpoint
    ]


def test_off_the_gang_waits_for_a_long_job():
    replay = replayed(world(), {"a": 2}, checkpoints_declared=True)
    big = records(replay)[5]
    assert big.started_at - big.job.submit > 7 * HOUR and replay.stats["moves"] == 0


def test_on_a_checkpointing_job_moves_and_the_gang_starts_within_minutes():
    replay = replayed(world(), {"a": 2}, checkpoints_declared=True, defrag_gpu_h=1.0)
    recs = records(replay)
    big = recs[5]
    assert big.started_at - big.job.submit < 5 * 60  # the grace (60 s) and a few cycles
    assert replay.stats["moves"] == 1
    (stop,) = replay.stops
    mover = recs[stop[0]]
    assert stop[0] in (1, 4) and stop[3] == 5 and mover.moved_at == stop[1]
    # The work since its 2 h checkpoint (about 2 min, and the grace period) is lost, a move's.
    assert 120 <= mover.lost_move_s == mover.lost_s <= 300 and mover.lost_reclaim_s == 0
    # Started again at once (the cycle after the gang's), and it finished.
    assert mover.finished_at is not None
    line = json_line(summarize(replay.result))
    assert line["moves"] == 1 and line["lost_gpu_hours_by_cause"]["move"] == round(4 * mover.lost_s / 3600, 1)
    assert line["max_wait_8gpu_s"] < 300


def test_a_job_that_does_not_checkpoint_is_not_moved():
    replay = replayed(world(), {"a": 2}, defrag_gpu_h=1.0)  # nothing declared: nobody may move
    big = records(replay)[5]
    assert replay.stats["moves"] == 0 and big.started_at - big.job.submit > 7 * HOUR


def test_a_move_that_would_lose_more_than_the_limit_is_not_made():
    replay = replayed(world(), {"a": 2}, checkpoints_declared=True, defrag_gpu_h=0.05)  # 180 GPU-s; ~480 at stake
    assert replay.stats["moves"] == 0
