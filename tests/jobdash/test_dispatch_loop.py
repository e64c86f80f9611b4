"""DispatcherLoop: a refused term stops only that term (the loop drives the real
dispatcher in test_dispatch_failover and the browser test)."""

from jobdash.dispatch.loop import DispatcherLoop
from jobdash.dispatch.writers import transitions


class Idle:
    """A dispatcher the loop never gets to call: it is not started."""


def test_a_refused_old_term_does_not_step_down_the_new_one():
    loop = DispatcherLoop(Idle(), tick_seconds=60)  # type: ignore[arg-type]
    loop._term = 2  # elected again while a cycle under term 1 was still running
    loop._step_down(1, transitions.StaleTerm("term 1 is older than the recorded term 2"))
    assert loop._term == 2
    loop._step_down(2, transitions.StaleTerm("term 2 is older than the recorded term 3"))
    assert loop._term is None
