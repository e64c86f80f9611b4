"""Leader election on Consul: a session with a TTL holds a KV lock.

The session uses behavior=delete (the key vanishes when the session is invalidated, so
no stale leader stays visible) and a small lock-delay (after an invalidation Consul
refuses to hand the key to anyone for that long, which covers a leader that learns of
its loss late). The leader renews at TTL/2 (LeaderLoop.renew_every).

The term is the key's ModifyIndex right after our acquire, not its LockIndex: with
behavior=delete the key is deleted when a leader dies, and Consul restarts LockIndex
at 1 on the recreated key, so LockIndex goes backwards across a crash. ModifyIndex is
the Raft index of our acquiring write, larger than every index before it.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.parse

import consul
import requests
from consul.callback import CB

from jobdash.leader.base import BackendError, Leadership

log = logging.getLogger("jobdash.leader")

# Consul's errors and the transport's (connection refused, timeout) that py-consul passes on.
ERRORS = (consul.ConsulException, requests.RequestException)


def parse_address(address: str) -> tuple[str, int, str]:
    """CONSUL_HTTP_ADDR forms "host:port" and "scheme://host:port" -> (host, port, scheme)."""
    parsed = urllib.parse.urlsplit(address if "//" in address else f"//{address}")
    if not parsed.hostname:
        raise ValueError(f"invalid Consul address {address!r}: expected host:port or scheme://host:port")
    return parsed.hostname, parsed.port or 8500, parsed.scheme or "http"


def go_duration(seconds: float) -> str:
    """Seconds as a Go duration string, which Consul parses (e.g. "10s", "1500ms")."""
    return f"{round(seconds * 1000)}ms"


class ConsulElector:
    def __init__(
        self,
        identity: str,
        *,
        address: str | None = None,
        key: str = "jobdash/leader",
        ttl: float = 10.0,
        lock_delay: float = 1.0,
        timeout: float | None = None,
    ) -> None:
        self.identity = identity
        self.key = key
        self.ttl = ttl
        self.lock_delay = lock_delay
        # Every call must end well inside the TTL, or a hung renew outlives the lease.
        self.timeout = timeout if timeout is not None else min(2.0, ttl / 3)
        self.host, self.port, self.scheme = parse_address(
            address or os.environ.get("CONSUL_HTTP_ADDR", "127.0.0.1:8500")
        )
        self._client = self._new_client()
        self._session: str | None = None
        self._valid_until = 0.0  # monotonic time until which our session surely lives
        self._leadership: Leadership | None = None

    def _new_client(self) -> consul.Consul:
        return consul.Consul(host=self.host, port=self.port, scheme=self.scheme, connections_timeout=self.timeout)

    # --- the session ---

    def _ensure_session(self) -> str:
        """Renew our session, or create one when there is none or it is gone."""
        if self._session is not None:
            sent = time.monotonic()
            try:
                if self._client.session.renew(self._session) is not None:
                    self._valid_until = sent + self.ttl
                    return self._session
            except consul.NotFound:
                pass
            self._session = None
        body = {
            "Name": f"jobdash-leader {self.identity}",
            "TTL": go_duration(self.ttl),
            "Behavior": "delete",
            "LockDelay": go_duration(self.lock_delay),
        }
        sent = time.monotonic()
        # Straight through py-consul's transport: session.create() insists on a whole
        # number of seconds >= 10 (Consul's own minimum), while tests run against the
        # test server with TTLs of about a second.
        self._session = self._client.http.put(
            CB.json(is_id=True), "/v1/session/create", data=json.dumps(body), headers=self._client.prepare_headers()
        )
        self._valid_until = sent + self.ttl
        return self._session

    def _lost(self) -> bool:
        self._leadership = None
        return False

    # --- the Elector protocol ---

    def valid_until(self) -> float:
        """The monotonic time up to which this process may act as leader: its session
        surely lives until the last renew it sent plus the TTL."""
        return self._valid_until if self._leadership is not None else float("-inf")

    def try_acquire(self) -> Leadership | None:
        if self._leadership is not None:
            return self._leadership
        since = time.time()
        value = json.dumps({"identity": self.identity, "since": since})
        try:
            session = self._ensure_session()
            if not self._client.kv.put(self.key, value, acquire=session):
                return None  # held by another session, or inside a lock-delay
            _, entry = self._client.kv.get(self.key)
        except ERRORS as error:
            # Keep the session: if it died, the next renew says so (NotFound) and we
            # make a new one; if it lives and the acquire did land, the next attempt
            # with the same session gets the lock back instead of waiting for it.
            log.info("consul acquire failed: %s", error)
            return None
        if entry is None or entry.get("Session") != session:
            return None  # lost between the acquire and the read
        self._leadership = Leadership(identity=self.identity, term=entry["ModifyIndex"], since=since)
        return self._leadership

    def renew(self) -> bool:
        if self._leadership is None or self._session is None:
            return False
        sent = time.monotonic()
        try:
            if self._client.session.renew(self._session) is None:
                return self._lost()
            # The session lives, but does it still hold the key? Someone may have
            # deleted it (consul kv delete), and another session may own it now.
            _, entry = self._client.kv.get(self.key)
        except consul.NotFound:
            log.warning("consul session %s is gone", self._session)
            self._session = None
            return self._lost()
        except ERRORS as error:
            # Unknown outcome: the session surely lives until the last renew we sent
            # plus the TTL; past that, assume the worst.
            log.warning("consul renew failed: %s", error)
            if time.monotonic() < self._valid_until:
                return True
            return self._lost()
        if entry is None or entry.get("Session") != self._session:
            log.warning("consul key %s no longer held by session %s", self.key, self._session)
            return self._lost()
        self._valid_until = sent + self.ttl
        return True

    def resign(self) -> None:
        session, self._session = self._session, None
        was_leader, self._leadership = self._leadership is not None, None
        if session is None:
            return
        try:
            # Release before destroying: destroying a session that holds the key counts
            # as an invalidation and would impose lock-delay on our successor.
            if was_leader:
                self._client.kv.put(self.key, None, release=session)
            self._client.session.destroy(session)
        except ERRORS as error:
            log.warning("consul resign failed (the session will expire by TTL): %s", error)

    def holder(self) -> Leadership | None:
        try:
            # A client of its own: holder() is called from other threads (/status).
            _, entry = self._new_client().kv.get(self.key)
        except ERRORS as error:
            raise BackendError(f"consul: {error}") from error
        if entry is None or not entry.get("Session"):
            return None
        try:
            value = json.loads(entry["Value"])
            return Leadership(identity=value["identity"], term=entry["ModifyIndex"], since=value["since"])
        except (TypeError, ValueError, KeyError) as error:
            raise BackendError(f"consul key {self.key} holds no jobdash leader: {entry.get('Value')!r}") from error

    def wait_for_change(self, timeout: float) -> bool:
        """Follower: block on the key (Consul blocking query) until it changes or
        `timeout` passes, to notice a release at once. False when it did not block."""
        try:
            index, entry = self._client.kv.get(self.key)
            if entry is None or not entry.get("Session"):
                # Free, yet our acquire failed: we are inside a lock-delay, and a
                # blocking query would sleep until some unrelated change.
                return False
            self._client.kv.get(self.key, index=index, wait=go_duration(timeout))
            return True
        except ERRORS:
            return False
