"""PostgreSQL advisory-lock election against the real server the harness starts."""

import os
import uuid

import psycopg
import pytest

from jobdash.leader import make_elector
from jobdash.leader.postgres import lock_key
from tests.waiting import wait_until

DSN = os.environ.get("DATABASE_URL", "")
needs_postgres = pytest.mark.skipif(
    not DSN.startswith(("postgres://", "postgresql://")), reason="needs PostgreSQL (run through tests/harness.py)"
)


@pytest.fixture
def elector():
    name = f"test-{uuid.uuid4()}"  # an election of its own per test
    made = []

    def make(identity):
        made.append(make_elector("postgres", identity=identity, dsn=DSN, name=name))
        return made[-1]

    yield make
    for each in made:
        each.resign()


def terminate_leader(name: str) -> None:
    """Kill the leader's backend from a third connection, as a crash or a DBA would."""
    with psycopg.connect(DSN, autocommit=True) as conn:
        killed = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM jobdash_leader WHERE name = %s", (name,)
        ).fetchone()[0]
    assert killed


@needs_postgres
def test_one_wins_and_any_process_sees_it(elector):
    a, b, onlooker = elector("A"), elector("B"), elector("onlooker")
    assert onlooker.holder() is None  # nobody elected yet in this election
    won = a.try_acquire()
    assert won is not None and won.identity == "A" and won.term > 0
    assert b.try_acquire() is None
    assert a.try_acquire() == won
    assert a.renew() is True and b.renew() is False
    assert onlooker.holder() == won and b.holder() == won


@needs_postgres
def test_a_terminated_leader_loses_and_the_other_takes_over_with_a_larger_term(elector):
    a, b = elector("A"), elector("B")
    first = a.try_acquire()
    assert b.try_acquire() is None
    terminate_leader(a.name)
    assert a.renew() is False
    # The row still names A, but its backend no longer holds the lock: no dead leader shown.
    assert wait_until(lambda: b.holder() is None, 2)
    second = wait_until(b.try_acquire, 2)
    assert second is not None and second.identity == "B" and second.term > first.term
    assert a.holder() == second


@needs_postgres
def test_resign_hands_over_at_once(elector):
    a, b = elector("A"), elector("B")
    first = a.try_acquire()
    a.resign()
    assert a.renew() is False
    second = wait_until(b.try_acquire, 1)  # the server drops the lock as the connection closes
    assert second is not None and second.term > first.term
    b.resign()
    again = wait_until(a.try_acquire, 1)  # and back: terms keep rising
    assert again is not None and again.term > second.term


def test_lock_key_is_a_stable_signed_64_bit_integer():
    assert lock_key("jobdash-leader") == lock_key("jobdash-leader") != lock_key("other")
    assert all(-(2**63) <= lock_key(name) < 2**63 for name in ("a", "b", "jobdash-leader"))


def test_postgres_election_needs_a_postgres_dsn():
    with pytest.raises(ValueError):
        make_elector("postgres", identity="x", dsn="sqlite:///var/jobdash.sqlite3")
