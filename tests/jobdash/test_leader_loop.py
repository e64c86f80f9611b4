"""LeaderLoop: callbacks in order, immediate step-down, handover, and two beats."""

import os
import socket
import threading
import time
import uuid

import pytest

from jobdash.leader import LeaderLoop, Leadership, make_elector
from tests.waiting import wait_until

TTL = 1.0
LOCK_DELAY = 0.3
DSN = os.environ.get("DATABASE_URL", "")


class Recorder:
    """Callbacks that log into one list, with whether the loop still claimed leadership."""

    def __init__(self) -> None:
        self.events: list = []
        self.loop: LeaderLoop | None = None

    def elected(self, leadership: Leadership) -> None:
        self.events.append(("elected", leadership.term, time.monotonic()))

    def lost(self) -> None:
        self.events.append(("lost", self.loop.is_leader(), time.monotonic()))

    def names(self) -> list:
        return [event[0] for event in self.events]


def run_loop(elector, renew_every=0.1, retry_every=0.05) -> tuple[LeaderLoop, Recorder]:
    recorder = Recorder()
    loop = LeaderLoop(
        elector, on_elected=recorder.elected, on_lost=recorder.lost, renew_every=renew_every, retry_every=retry_every
    )
    recorder.loop = loop
    loop.start()
    return loop, recorder


class ScriptedElector:
    """Leads with terms 1, 2, ...; the first renew fails, then renew raises once."""

    def __init__(self, log: list) -> None:
        self.identity = "scripted"
        self.log = log
        self.terms = 0
        self.renewals = 0

    def try_acquire(self):
        self.log.append("try_acquire")
        self.terms += 1
        return Leadership(self.identity, self.terms, time.time())

    def renew(self) -> bool:
        self.log.append("renew")
        self.renewals += 1
        if self.renewals == 2:
            raise ConnectionError("backend gone")
        return self.renewals > 2

    def resign(self) -> None:
        self.log.append("resign")

    def holder(self):
        return None

    def valid_until(self) -> float:
        return float("inf")


def test_none_backend_always_leads():
    elector = make_elector("none", identity="solo")
    leadership = elector.try_acquire()
    assert (leadership.identity, leadership.term) == ("solo", 1)
    assert elector.renew() is True and elector.holder() == leadership
    loop, recorder = run_loop(elector)
    assert wait_until(loop.is_leader, 2)
    loop.stop()
    assert recorder.names() == ["elected", "lost"] and loop.leadership is None


def test_default_identity_and_unknown_backend():
    assert make_elector("none").identity == f"{socket.gethostname()}:{os.getpid()}"
    with pytest.raises(ValueError):
        make_elector("zookeeper")


def test_step_down_comes_first_and_callbacks_fire_in_order():
    log: list = []
    elector = ScriptedElector(log)
    recorder = Recorder()
    recorder.events = log  # one list: elector calls and callbacks interleaved as they happened
    loop = LeaderLoop(elector, on_elected=recorder.elected, on_lost=recorder.lost, renew_every=0.02, retry_every=0.02)
    recorder.loop = loop
    loop.start()
    assert wait_until(lambda: elector.renewals >= 3, 3)
    loop.stop()
    names = [entry if isinstance(entry, str) else entry[0] for entry in log]
    # renew False -> lost at once; renew raising counts as lost too; each loss before any retry.
    assert names[:8] == ["try_acquire", "elected", "renew", "lost", "try_acquire", "elected", "renew", "lost"]
    assert [entry[1] for entry in log if entry[0] == "elected"][:2] == [1, 2]
    assert all(entry[1] is False for entry in log if entry[0] == "lost")  # is_leader() already false
    assert names[-2:] == ["lost", "resign"]  # stop: stop acting, then hand over


def test_stop_with_resign_hands_over_quickly(consul_server):
    # A 5 s TTL: a handover that waited for the lease would take over 5 s.
    options = {"address": consul_server.address, "key": "beat", "ttl": 5.0, "lock_delay": 1.0}
    a_loop, a = run_loop(make_elector("consul", identity="A", **options))
    assert wait_until(a_loop.is_leader, 2)
    b_loop, b = run_loop(make_elector("consul", identity="B", **options), retry_every=2.0)
    time.sleep(0.2)  # B is now parked in a blocking query on the key
    stopped_at = time.monotonic()
    a_loop.stop(resign=True)
    assert wait_until(b_loop.is_leader, 3)
    b_loop.stop()
    lost_at, elected_at = a.events[-1][2], b.events[0][2]
    assert a.names() == ["elected", "lost"] and lost_at <= elected_at  # A stopped before B began
    assert elected_at - stopped_at < 1.0


def test_stop_without_resign_leaves_the_lock_to_expire(consul_server):
    options = {"address": consul_server.address, "key": "beat", "ttl": TTL, "lock_delay": LOCK_DELAY}
    loop, recorder = run_loop(make_elector("consul", identity="A", **options))
    assert wait_until(loop.is_leader, 2)
    leadership = loop.leadership
    loop.stop(resign=False)
    assert recorder.names() == ["elected", "lost"]
    assert make_elector("consul", identity="B", **options).holder() == leadership


class Beat:
    """A beat replica: emits a tick every 20 ms while its loop says it leads."""

    def __init__(self, elector, ticks: list) -> None:
        self.loop, self.recorder = run_loop(elector, renew_every=TTL / 2, retry_every=0.1)
        self.ticks = ticks
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            leadership = self.loop.leadership
            if leadership is not None:
                self.ticks.append((time.monotonic(), leadership.identity, leadership.term))
            time.sleep(0.02)

    def kill(self) -> float:
        """The process dies: it stops acting and never renews or resigns."""
        self.running = False
        self.thread.join()
        self.loop.stop(resign=False)
        return time.monotonic()


def two_beats_fail_over(make, kill_extra=lambda identity: None, takeover_within=2.0) -> None:
    ticks: list = []
    beats = {"A": Beat(make("A"), ticks), "B": Beat(make("B"), ticks)}
    try:
        assert wait_until(lambda: len(ticks) >= 10, 3)
        emitters = {identity for _, identity, _ in ticks}
        assert len(emitters) == 1  # only one beat emits
        leader = emitters.pop()
        other = "B" if leader == "A" else "A"
        killed_at = beats[leader].kill()
        kill_extra(leader)
        assert wait_until(lambda: any(identity == other for _, identity, _ in ticks), takeover_within + 1)
        old = [(t, term) for t, identity, term in ticks if identity == leader]
        new = [(t, term) for t, identity, term in ticks if identity == other]
        assert max(t for t, _ in old) <= killed_at < min(t for t, _ in new)  # never both at once
        assert min(t for t, _ in new) - killed_at <= takeover_within
        assert min(term for _, term in new) > max(term for _, term in old)
    finally:
        for beat in beats.values():
            beat.running = False
            beat.loop.stop()


def test_two_consul_beats_only_one_emits_and_the_other_takes_over(consul_server):
    options = {"address": consul_server.address, "key": "beat", "ttl": TTL, "lock_delay": LOCK_DELAY}
    two_beats_fail_over(lambda identity: make_elector("consul", identity=identity, **options), takeover_within=TTL + 2)


@pytest.mark.skipif(not DSN.startswith(("postgres://", "postgresql://")), reason="needs PostgreSQL")
def test_two_postgres_beats_only_one_emits_and_the_other_takes_over():
    """The dead beat's lease runs out (its connection may well stay open): the other
    takes over within the TTL."""
    name = f"test-{uuid.uuid4()}"
    two_beats_fail_over(
        lambda identity: make_elector("postgres", identity=identity, dsn=DSN, name=name, ttl=TTL),
        takeover_within=TTL + 1,
    )
