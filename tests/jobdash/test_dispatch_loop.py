"""DispatcherLoop: cycles in one thread, the tracker in another, next to them; a refused
term stops only that term. The dispatcher here is a recorder of what the loop asks of it
(the real one is driven by the loop in test_dispatch_failover and the browser test)."""

import threading

import pytest

from jobdash.dispatch import transitions
from jobdash.dispatch.loop import DispatcherLoop

from .dispatch_support import eventually

pytestmark = pytest.mark.django_db(transaction=True)


class Recorder:
    def __init__(self):
        self.calls: list[tuple[str, str, int, bool | None]] = []
        self.follow_started = threading.Event()
        self.release_follow = threading.Event()

    def reconcile(self, term: int) -> dict:
        self.calls.append(("reconcile", threading.current_thread().name, term, None))
        return {}

    def cycle(self, term: int, *, follow: bool = True) -> None:
        self.calls.append(("cycle", threading.current_thread().name, term, follow))

    def follow(self, term: int) -> dict:
        self.calls.append(("follow", threading.current_thread().name, term, None))
        self.follow_started.set()
        self.release_follow.wait(10)  # a slow tracker pass
        return {}


def test_cycles_do_not_wait_for_the_tracker():
    recorder = Recorder()
    loop = DispatcherLoop(recorder, tick_seconds=0.05)  # type: ignore[arg-type]
    loop.start()
    try:
        assert recorder.follow_started.wait(10), "the tracker never ran"
        # While one tracker pass hangs, cycles go on, each without the tracker.
        follows = sum(1 for call in recorder.calls if call[0] == "follow")
        cycles_then = sum(1 for call in recorder.calls if call[0] == "cycle")
        eventually(lambda: sum(1 for call in recorder.calls if call[0] == "cycle") >= cycles_then + 3)
        assert sum(1 for call in recorder.calls if call[0] == "follow") == follows
    finally:
        recorder.release_follow.set()
        loop.stop()
    kinds = [call[0] for call in recorder.calls]
    assert kinds[0] == "reconcile", "the tracker ran before the term's reconcile"
    cycles = [call for call in recorder.calls if call[0] == "cycle"]
    assert cycles and all(follow is False for *_, follow in cycles)
    assert {name for kind, name, *_ in recorder.calls if kind == "cycle"} == {"dispatcher"}
    assert {name for kind, name, *_ in recorder.calls if kind == "follow"} == {"dispatcher-follow"}


def test_a_refused_old_term_does_not_step_down_the_new_one():
    loop = DispatcherLoop(Recorder(), tick_seconds=60)  # type: ignore[arg-type]
    loop._term = 2
    loop._step_down(1, transitions.StaleTerm("term 1 is older than the recorded term 2"))
    assert loop._term == 2
    loop._step_down(2, transitions.StaleTerm("term 2 is older than the recorded term 3"))
    assert loop._term is None
