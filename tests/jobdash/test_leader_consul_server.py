"""The Consul test server itself follows Consul's documented session and KV semantics,
so the election tests that run against it mean something."""

import threading
import time

import consul
import pytest
import requests

from tests.consul_server import ConsulTestServer
from tests.waiting import wait_until


@pytest.fixture
def client(consul_server):
    return consul.Consul(host="127.0.0.1", port=consul_server.port)


def create(server, **fields) -> str:
    """Create a session over raw HTTP, as Consul's docs spell the fields (py-consul
    lowercases them and insists on TTL >= 10 s)."""
    reply = requests.put(f"http://{server.address}/v1/session/create", json=fields, timeout=5)
    assert reply.status_code == 200, reply.text
    return reply.json()["ID"]


def test_session_lifecycle(consul_server, client):
    sid = create(consul_server, Name="s", TTL="5s", Behavior="delete", LockDelay="250ms")
    _, info = client.session.info(sid)
    assert (info["Name"], info["TTL"], info["Behavior"], info["LockDelay"]) == ("s", "5s", "delete", 250_000_000)
    assert client.session.renew(sid)["ID"] == sid
    assert client.session.destroy(sid) is True
    with pytest.raises(consul.NotFound):
        client.session.renew(sid)
    assert client.session.info(sid)[1] is None  # Consul answers [] for a gone session


def test_session_create_validates_like_consul():
    with ConsulTestServer(min_ttl=10) as strict:
        reply = requests.put(f"http://{strict.address}/v1/session/create", json={"TTL": "1s"}, timeout=5)
        assert reply.status_code == 500 and "Invalid Session TTL" in reply.text
        bad = requests.put(f"http://{strict.address}/v1/session/create", json={"Behavior": "keep"}, timeout=5)
        assert bad.status_code == 500
        # py-consul's own create (lowercase fields, TTL 10s, lock delay as "2s") works.
        c = consul.Consul(host="127.0.0.1", port=strict.port)
        sid = c.session.create(name="n", ttl=10, behavior="delete", lock_delay=2)
        assert c.session.info(sid)[1]["LockDelay"] == 2_000_000_000
        # A number below 1000 is seconds, above it nanoseconds (Consul's FixupLockDelay).
        assert c.session.info(create(strict, LockDelay=3))[1]["LockDelay"] == 3_000_000_000
        assert c.session.info(create(strict, LockDelay=500_000_000))[1]["LockDelay"] == 500_000_000


def test_ttl_expiry_releases_locks_of_release_sessions(consul_server, client):
    kept = create(consul_server, TTL="300ms", Behavior="release")
    dropped = create(consul_server, TTL="300ms", Behavior="release", LockDelay="0s")
    assert client.kv.put("a", "held", acquire=dropped)
    _, before = client.kv.get("a")
    start = time.monotonic()
    while time.monotonic() - start < 0.8:  # renew one session, neglect the other
        client.session.renew(kept)
        time.sleep(0.05)
    assert client.session.info(kept)[1] is not None
    assert client.session.info(dropped)[1] is None
    _, after = client.kv.get("a")
    assert "Session" not in after and after["Value"] == b"held" and after["LockIndex"] == 1
    assert after["ModifyIndex"] > before["ModifyIndex"]


def test_invalidation_of_delete_sessions_deletes_their_keys(consul_server, client):
    expiring = create(consul_server, TTL="200ms", Behavior="delete", LockDelay="0s")
    destroyed = create(consul_server, Behavior="delete", LockDelay="0s")
    assert client.kv.put("by-ttl", "x", acquire=expiring)
    assert client.kv.put("by-destroy", "x", acquire=destroyed)
    client.session.destroy(destroyed)
    assert client.kv.get("by-destroy")[1] is None
    assert wait_until(lambda: client.kv.get("by-ttl")[1] is None, 2)


def test_acquire_and_release(consul_server, client):
    one, two = create(consul_server), create(consul_server)
    assert client.kv.put("k", "1", acquire=one)
    assert client.kv.get("k")[1]["LockIndex"] == 1
    assert not client.kv.put("k", "2", acquire=two)  # held by another session
    _, held = client.kv.get("k")
    assert client.kv.put("k", "3", acquire=one)  # the holder updates without re-locking
    _, again = client.kv.get("k")
    assert (again["LockIndex"], again["Value"]) == (1, b"3") and again["ModifyIndex"] > held["ModifyIndex"]
    assert client.kv.put("k", "plain")  # a write without acquire goes through and keeps the lock
    assert client.kv.get("k")[1]["Session"] == one
    assert not client.kv.put("k", "x", release=two)  # only the holder releases
    assert client.kv.put("k", "free", release=one)
    _, free = client.kv.get("k")
    assert "Session" not in free and free["LockIndex"] == 1
    assert client.kv.put("k", "2", acquire=two)  # a release imposes no lock-delay
    assert client.kv.get("k")[1]["LockIndex"] == 2
    with pytest.raises(consul.ConsulException, match="invalid session"):
        client.kv.put("other", "x", acquire="no-such-session")


def test_lock_delay_follows_invalidation(consul_server, client):
    holder = create(consul_server, LockDelay="400ms")
    other = create(consul_server)
    assert client.kv.put("k", "x", acquire=holder)
    client.session.destroy(holder)
    start = time.monotonic()
    assert not client.kv.put("k", "x", acquire=other)  # the key is free, yet refused
    assert wait_until(lambda: client.kv.put("k", "x", acquire=other), 2)
    assert time.monotonic() - start >= 0.35


def test_a_recreated_key_restarts_lock_index(consul_server, client):
    """Why the election's term is ModifyIndex: with behavior=delete LockIndex goes back."""
    first, second = create(consul_server, Behavior="delete", LockDelay="0s"), create(consul_server)
    assert client.kv.put("k", "x", acquire=first) and client.kv.put("k", "x", release=first)
    assert client.kv.put("k", "x", acquire=first)
    _, old = client.kv.get("k")
    client.session.destroy(first)  # behavior=delete: the key goes away
    assert client.kv.put("k", "x", acquire=second)
    _, new = client.kv.get("k")
    assert (old["LockIndex"], new["LockIndex"]) == (2, 1)
    assert new["ModifyIndex"] > old["ModifyIndex"]


def test_check_and_set(consul_server, client):
    assert client.kv.put("k", "a", cas=0)
    assert not client.kv.put("k", "b", cas=0)  # 0: only when absent
    _, entry = client.kv.get("k")
    assert not client.kv.put("k", "b", cas=entry["ModifyIndex"] - 1)
    assert client.kv.put("k", "b", cas=entry["ModifyIndex"])
    assert not client.kv.delete("k", cas=entry["ModifyIndex"])  # stale now
    assert client.kv.delete("k", cas=client.kv.get("k")[1]["ModifyIndex"])
    assert client.kv.get("k")[1] is None


def test_index_advances_on_writes_only(consul_server, client):
    sid = create(consul_server)
    index, _ = client.kv.get("k")
    client.session.renew(sid)
    assert not client.kv.put("k", "x", cas=5)  # refused: no write
    assert client.kv.get("k")[0] == index
    assert client.kv.put("k", "x")
    new_index, entry = client.kv.get("k")
    assert int(new_index) > int(index) and entry["ModifyIndex"] == int(new_index)


def test_blocking_query_returns_on_change(consul_server, client):
    writer = consul.Consul(host="127.0.0.1", port=consul_server.port)  # a client per thread
    client.kv.put("k", "old")
    index, _ = client.kv.get("k")
    threading.Timer(0.2, writer.kv.put, ("k", "new")).start()
    start = time.monotonic()
    new_index, entry = client.kv.get("k", index=index, wait="5s")
    assert 0.15 < time.monotonic() - start < 2
    assert entry["Value"] == b"new" and int(new_index) > int(index)
    # A deletion wakes it too, and an absent key still carries an index.
    threading.Timer(0.2, writer.kv.delete, ("k",)).start()
    gone_index, gone = client.kv.get("k", index=new_index, wait="5s")
    assert gone is None and int(gone_index) > int(new_index)


def test_blocking_query_returns_after_wait_without_change(consul_server, client):
    client.kv.put("k", "v")
    index, _ = client.kv.get("k")
    client.kv.put("unrelated", "v")  # another key's write does not wake this query
    start = time.monotonic()
    reply = requests.get(f"http://{consul_server.address}/v1/kv/k", params={"index": index, "wait": "300ms"}, timeout=5)
    assert time.monotonic() - start >= 0.3
    assert reply.headers["X-Consul-Index"] == index == str(reply.json()[0]["ModifyIndex"])
    missing = requests.get(f"http://{consul_server.address}/v1/kv/absent", timeout=5)
    assert missing.status_code == 404 and int(missing.headers["X-Consul-Index"]) > 0


def test_crash_and_restart(consul_server, client):
    sid = create(consul_server, TTL="400ms")
    client.kv.put("k", "v", acquire=sid)
    index, _ = client.kv.get("k")
    blocked = {}

    def blocking_read():
        try:
            client.kv.get("k", index=index, wait="5s")
        except requests.RequestException as error:
            blocked["error"] = error

    reader = threading.Thread(target=blocking_read)
    reader.start()
    time.sleep(0.1)
    consul_server.crash()
    reader.join(3)
    assert isinstance(blocked.get("error"), requests.RequestException)  # cut, not answered
    with pytest.raises(requests.ConnectionError):
        client.kv.get("k")
    time.sleep(0.6)  # longer than the TTL: nothing expires while the server is down
    consul_server.restart()
    assert client.session.renew(sid)["ID"] == sid
    assert client.kv.get("k")[1]["Session"] == sid
    assert wait_until(lambda: client.session.info(sid)[1] is None, 2)  # the timer runs again
