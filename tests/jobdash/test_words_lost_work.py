"""Issue 48: a victim is told what leaving now costs it."""

from datetime import UTC, datetime

from jobdash.jobs.words import lost_words, preemption_words, redone_words
from queueing.preemption import PRIORITY, Preemption


def test_a_victim_hears_how_far_it_is_past_its_last_checkpoint_and_the_gpu_minutes_redone():
    assert lost_words(240.0, 8 * 240.0, True) == "leaving now, 4m 00s after its last checkpoint: 32 GPU-minutes redone"
    assert lost_words(3000.0, 0.0, False) == "leaving now, 50m into a run with no checkpoint: 50m redone"
    assert lost_words(0.0, 0.0, False, on_notice=True) == "it loses no work (it checkpoints on notice)"
    assert lost_words(0.0, 0.0, True) == "it loses no work (it has just checkpointed)"
    # Small amounts are not rounded away, and one is one.
    assert lost_words(48.0, 384.0, True).endswith(": 6.4 GPU-minutes redone")
    assert lost_words(60.0, 60.0, True).endswith(": 1 GPU-minute redone")


def test_the_preemption_note_says_what_it_loses():
    preemption = Preemption(7, "team-a", 9, PRIORITY, lost_s=240.0, lost_gpu_s=1920.0, checkpointed_at=1.0)
    note, preemptor_note = preemption_words(
        preemption, "team-a", "big", "team-a", "urgent", datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
    )
    assert note.endswith("checkpoint before then; leaving now, 4m 00s after its last checkpoint: 32 GPU-minutes redone")
    assert "job 7 (team-a/big)" in preemptor_note


def test_a_stop_says_what_was_redone():
    at = datetime(2026, 12, 7, 14, 2, tzinfo=UTC)
    assert redone_words(240.0, 1920.0, at) == "32 GPU-minutes redone (4m 00s, since its checkpoint at 14:02:00 UTC)"
    assert redone_words(0.0, 0.0, at) == "no work lost (it checkpointed on notice)"
