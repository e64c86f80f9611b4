"""Consul leader election against the Consul test server, with a 1 s TTL."""

import json
import threading
import time

import consul
import pytest

from jobdash.leader import BackendError, make_elector
from jobdash.leader.consul import parse_address
from tests.waiting import wait_until

TTL = 1.0
LOCK_DELAY = 0.3


@pytest.fixture
def client(consul_server):
    return consul.Consul(host="127.0.0.1", port=consul_server.port)


@pytest.fixture
def elector(consul_server):
    made = []

    def make(identity, **options):
        options = {
            "address": consul_server.address,
            "key": "jobdash/leader",
            "ttl": TTL,
            "lock_delay": LOCK_DELAY,
        } | options
        made.append(make_elector("consul", identity=identity, **options))
        return made[-1]

    yield make
    for each in made:
        each.resign()


def test_exactly_one_acquires_and_the_holder_is_reported(elector, client, consul_server):
    a, b = elector("A"), elector("B")
    won = a.try_acquire()
    assert won is not None and won.identity == "A"
    assert b.try_acquire() is None
    assert a.try_acquire() == won  # asking again while leading changes nothing
    assert a.holder() == won and b.holder() == won
    _, entry = client.kv.get("jobdash/leader")
    assert json.loads(entry["Value"])["identity"] == "A"
    session = consul_server.state.sessions[entry["Session"]]
    assert (session.behavior, session.ttl, session.lock_delay) == ("delete", TTL, LOCK_DELAY)


def test_holder_is_none_without_a_leader_and_an_error_when_consul_is_down(elector, consul_server):
    a = elector("A")
    assert a.holder() is None
    consul_server.crash()
    with pytest.raises(BackendError):
        a.holder()


def test_terms_strictly_increase_across_leaderships(elector, client):
    a, b = elector("A"), elector("B")
    first = a.try_acquire()
    a.resign()
    second = b.try_acquire()  # a resign hands over at once: no lock-delay after a release
    assert second is not None and second.term > first.term
    # B dies (stops renewing): its session expires and behavior=delete removes the key.
    third = wait_until(a.try_acquire, TTL + LOCK_DELAY + 2)
    assert third is not None and third.term > second.term
    # The recreated key restarted LockIndex at 1, below the 2 of B's leadership:
    # LockIndex would have been no fencing token; ModifyIndex is.
    assert client.kv.get("jobdash/leader")[1]["LockIndex"] == 1


def test_a_crashed_leader_is_replaced_within_ttl_and_lock_delay(elector):
    a, b = elector("A"), elector("B")
    assert a.try_acquire() is not None
    crashed_at = time.monotonic()  # A never renews from here on
    taken = wait_until(b.try_acquire, TTL + LOCK_DELAY + 2, interval=0.05)
    elapsed = time.monotonic() - crashed_at
    assert taken is not None and taken.identity == "B"
    assert TTL + LOCK_DELAY - 0.1 <= elapsed <= TTL + LOCK_DELAY + 2  # not before the lease ran out
    assert a.renew() is False


def test_a_leader_whose_session_is_destroyed_steps_down_at_next_renew(elector, client):
    a, b = elector("A"), elector("B")
    assert a.try_acquire() is not None
    assert a.renew() is True
    client.session.destroy(client.kv.get("jobdash/leader")[1]["Session"])
    assert client.kv.get("jobdash/leader")[1] is None  # behavior=delete
    assert a.renew() is False
    assert a.holder() is None
    # Lock-delay: the key is free, yet nobody may take it at once.
    destroyed_at = time.monotonic()
    assert b.try_acquire() is None
    assert wait_until(b.try_acquire, LOCK_DELAY + 2) is not None
    assert time.monotonic() - destroyed_at >= LOCK_DELAY - 0.05


def test_an_expired_session_deletes_the_key(elector, client):
    a = elector("A")
    assert a.try_acquire() is not None
    assert client.kv.get("jobdash/leader")[1] is not None
    assert wait_until(lambda: client.kv.get("jobdash/leader")[1] is None, TTL + 1)
    assert a.holder() is None


def test_a_leader_whose_key_is_deleted_steps_down(elector, client):
    a, b = elector("A"), elector("B")
    assert a.try_acquire() is not None
    client.kv.delete("jobdash/leader")  # an operator's `consul kv delete`; A's session lives on
    assert a.renew() is False
    assert b.try_acquire() is not None


def test_renew_rides_out_an_outage_shorter_than_the_ttl_and_fails_after(elector, consul_server):
    a = elector("A")
    first = a.try_acquire()
    acquired_at = time.monotonic()
    consul_server.crash()
    assert a.renew() is True  # the session surely lives until last renew + TTL
    assert wait_until(lambda: not a.renew(), TTL + 1, interval=0.05)
    assert TTL - 0.1 <= time.monotonic() - acquired_at <= TTL + 0.5
    # Consul comes back (session timers reset, as on leader failover): A's session still
    # holds the key, so A gets it back at once, under a new term.
    consul_server.restart()
    again = a.try_acquire()
    assert again is not None and again.term > first.term


def test_a_follower_notices_a_release_through_a_blocking_query(elector):
    a, b = elector("A"), elector("B")
    assert a.try_acquire() is not None
    assert b.try_acquire() is None
    start = time.monotonic()
    assert b.wait_for_change(0.3) is True  # nothing changes: returns after the wait
    assert time.monotonic() - start >= 0.3
    threading.Timer(0.2, a.resign).start()
    start = time.monotonic()
    assert b.wait_for_change(5) is True
    assert time.monotonic() - start < 2
    assert b.try_acquire() is not None


def test_wait_for_change_does_not_block_on_a_free_key(elector):
    b = elector("B")
    start = time.monotonic()
    assert b.wait_for_change(5) is False  # free key: the caller sleeps and retries itself
    assert time.monotonic() - start < 1


def test_consul_address_forms(monkeypatch):
    assert parse_address("127.0.0.1:8500") == ("127.0.0.1", 8500, "http")
    assert parse_address("https://consul.internal:8501") == ("consul.internal", 8501, "https")
    assert parse_address("consul") == ("consul", 8500, "http")
    with pytest.raises(ValueError):
        parse_address("http://:8500")
    monkeypatch.setenv("CONSUL_HTTP_ADDR", "http://10.0.0.7:9500")
    elector = make_elector("consul", identity="x")
    assert (elector.host, elector.port, elector.scheme) == ("10.0.0.7", 9500, "http")
