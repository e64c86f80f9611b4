"""PostgreSQL lease election against the real server the harness starts.

Leadership is a row with an expiry, never a connection: a paused leader (here: an
elector nobody calls) holds nothing once its lease has run out."""

import os
import time
import uuid

import psycopg
import pytest

from jobdash.leader import LeaderLoop, make_elector
from tests.waiting import wait_until

DSN = os.environ.get("DATABASE_URL", "")
needs_postgres = pytest.mark.skipif(
    not DSN.startswith(("postgres://", "postgresql://")), reason="needs PostgreSQL (run through tests/harness.py)"
)
TTL = 1.0


@pytest.fixture
def elector():
    name = f"test-{uuid.uuid4()}"  # an election of its own per test
    made = []

    def make(identity, ttl=TTL):
        made.append(make_elector("postgres", identity=identity, dsn=DSN, name=name, ttl=ttl))
        return made[-1]

    yield make
    for each in made:
        each.resign()


@needs_postgres
def test_one_wins_and_any_process_sees_it(elector):
    a, b, onlooker = elector("A", ttl=30), elector("B", ttl=30), elector("onlooker")
    assert onlooker.holder() is None  # nobody elected yet in this election
    won = a.try_acquire()
    assert won is not None and won.identity == "A" and won.term > 0
    assert b.try_acquire() is None
    assert a.try_acquire() == won
    assert a.renew() is True and b.renew() is False
    assert onlooker.holder() == won and b.holder() == won


@needs_postgres
def test_a_paused_leader_holds_nothing_once_its_lease_runs_out(elector):
    """A keeps its connection open and simply stops renewing, as a SIGSTOPped process
    would: B takes over within the TTL, with a larger term, and A's late renew fails."""
    a, b = elector("A"), elector("B")
    first = a.try_acquire()
    assert first is not None and b.try_acquire() is None
    started = time.monotonic()
    second = wait_until(b.try_acquire, 3, interval=0.05)
    assert second is not None and second.term > first.term
    assert time.monotonic() - started <= TTL + 0.5
    assert a.valid_until() < time.monotonic()  # A's own clock said stop before B took over
    assert a.renew() is False  # the woken leader learns it is deposed
    assert a.holder() == second


@needs_postgres
def test_renewing_in_time_keeps_the_lease_and_the_term(elector):
    a, b = elector("A"), elector("B")
    first = a.try_acquire()
    for _ in range(6):  # three TTLs, renewed at TTL/2
        time.sleep(TTL / 2)
        assert a.renew() is True
        assert b.try_acquire() is None
    assert a.holder() == first


@needs_postgres
def test_resign_hands_over_at_once(elector):
    a, b = elector("A", ttl=30), elector("B", ttl=30)
    first = a.try_acquire()
    a.resign()
    assert a.renew() is False
    second = b.try_acquire()  # no waiting for the 30 s lease
    assert second is not None and second.term > first.term
    b.resign()
    again = a.try_acquire()  # and back: terms keep rising
    assert again is not None and again.term > second.term


@needs_postgres
def test_a_lost_connection_is_not_lost_leadership(elector):
    """The lease outlives the connection it was taken on: a connection killed by the server
    is opened again and the lease renewed under the same term."""
    a = elector("A", ttl=30)
    first = a.try_acquire()
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (a._conn.info.backend_pid,))
    assert wait_until(a.renew, 3, interval=0.05)
    assert a.try_acquire() == first and a.holder() == first


@needs_postgres
def test_the_loop_stops_acting_when_its_lease_may_have_lapsed(elector):
    """The renewing thread is stuck (renew_every far beyond the TTL, as in a pause): the
    loop's leadership turns None by the monotonic clock, though the thread never noticed."""
    lost = []
    loop = LeaderLoop(elector("A"), renew_every=60, retry_every=60, on_lost=lambda: lost.append(True))
    loop.start()
    try:
        assert wait_until(lambda: loop.leadership is not None, 3)
        elected_at = time.monotonic()
        assert wait_until(lambda: loop.leadership is None, 3, interval=0.01)
        assert time.monotonic() - elected_at <= TTL
        assert lost == []  # nothing told the loop: its own clock did
    finally:
        loop.stop(resign=True)


def test_postgres_election_needs_a_postgres_dsn():
    with pytest.raises(ValueError):
        make_elector("postgres", identity="x", dsn="mysql://x@127.0.0.1/jobdash")
