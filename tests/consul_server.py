"""A Consul HTTP API test server: the session and KV subset that leader election uses.

No Consul can be installed here, so this follows Consul's documented semantics
(developer.hashicorp.com/consul/api-docs/session, /api-docs/kv, blocking queries) and,
where the docs are silent, its state store:

- sessions: create (Name, TTL, Behavior release|delete, LockDelay; field names in any
  case, as Go's JSON decoding allows), renew (404 when gone), destroy, info ([] when
  gone). A TTL session dies when not renewed for TTL x `ttl_multiplier` (Consul uses 2;
  default 1 here for fast tests); renewals reset the timer, and so does a restart after
  crash(), as Consul does on leader failover. Invalidation (TTL or destroy) applies the
  behavior to held keys (release: Session cleared; delete: key deleted) and starts
  each key's lock-delay, during which every acquire is refused.
- KV: GET (404 when absent) with blocking queries (?index=N&wait=5s returns once the
  key's index exceeds N, or after wait) and X-Consul-Index on every answer; PUT with
  ?acquire, ?release, ?cas, ?flags; DELETE with ?cas, ?recurse. An acquire by a new
  holder increments LockIndex; a new key starts at LockIndex 1.
- one global Raft-like index, advanced by every write that changes something.

Simplified: one datacenter, no ACLs, no health checks, no recurse/keys on GET.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_duration(text: str) -> float:
    """A Go duration ("10s", "1.5s", "500ms", "1m30s") in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ApiError(400, f"invalid duration {text!r}")
    return sum(float(n) * GO_UNITS[u] for n, u in parts)


def parse_lock_delay(value) -> float:
    # Consul's FixupLockDelay: a string is a duration; a number below 1000 is seconds,
    # anything larger nanoseconds.
    if isinstance(value, str):
        return parse_duration(value)
    return float(value) if value < 1000 else value / 1e9


@dataclass
class Session:
    id: str
    name: str
    behavior: str
    ttl_text: str
    ttl: float | None
    lock_delay: float
    create_index: int
    expires: float | None  # monotonic

    def to_json(self) -> dict:
        return {
            "ID": self.id,
            "Name": self.name,
            "Node": "consul-test",
            "Behavior": self.behavior,
            "TTL": self.ttl_text,
            "LockDelay": int(self.lock_delay * 1e9),
            "NodeChecks": ["serfHealth"],
            "ServiceChecks": None,
            "CreateIndex": self.create_index,
            "ModifyIndex": self.create_index,
        }


@dataclass
class Entry:
    key: str
    create_index: int
    modify_index: int = 0
    lock_index: int = 0
    flags: int = 0
    value: bytes = b""
    session: str | None = None

    def to_json(self) -> dict:
        out = {
            "Key": self.key,
            "CreateIndex": self.create_index,
            "ModifyIndex": self.modify_index,
            "LockIndex": self.lock_index,
            "Flags": self.flags,
            "Value": base64.b64encode(self.value).decode() if self.value else None,
        }
        if self.session:
            out["Session"] = self.session
        return out


class ConsulState:
    """All state behind one condition variable; every write notifies blocked readers."""

    def __init__(self, ttl_multiplier: float = 1.0, min_ttl: float = 0.0) -> None:
        self.ttl_multiplier = ttl_multiplier
        self.min_ttl = min_ttl  # real Consul: 10s
        self.cond = threading.Condition()
        self.index = 1
        self.kv_index = 1  # last KV write, deletes included: the index of an absent key
        self.sessions: dict[str, Session] = {}
        self.kv: dict[str, Entry] = {}
        self.lock_delay_until: dict[str, float] = {}
        self.down = False  # crashed: answer nothing, expire nothing

    def _write(self) -> int:
        self.index += 1
        self.cond.notify_all()
        return self.index

    # --- sessions ---

    def create_session(self, body: dict) -> Session:
        fields = {k.lower(): v for k, v in body.items()}
        behavior = fields.get("behavior") or "release"
        if behavior not in ("release", "delete"):
            raise ApiError(500, f"Invalid Behavior setting '{behavior}'")
        ttl_text = fields.get("ttl") or ""
        ttl = parse_duration(ttl_text) if ttl_text else None
        if ttl is not None and not self.min_ttl <= ttl <= 86400:
            raise ApiError(500, f"Invalid Session TTL '{ttl_text}', must be between [{self.min_ttl}s=24h0m0s]")
        lock_delay = parse_lock_delay(fields.get("lockdelay", "15s"))
        if not 0 <= lock_delay <= 60:
            raise ApiError(500, "Invalid Lock Delay, must be between 0s and 60s")
        with self.cond:
            now = time.monotonic()
            session = Session(
                id=str(uuid.uuid4()),
                name=fields.get("name") or "",
                behavior=behavior,
                ttl_text=ttl_text,
                ttl=ttl,
                lock_delay=lock_delay,
                create_index=self._write(),
                expires=None if ttl is None else now + ttl * self.ttl_multiplier,
            )
            self.sessions[session.id] = session
            return session

    def renew_session(self, session_id: str) -> Session | None:
        with self.cond:  # renewals live in the leader's memory, not in Raft: no index
            session = self.sessions.get(session_id)
            if session is not None and session.ttl is not None:
                session.expires = time.monotonic() + session.ttl * self.ttl_multiplier
            return session

    def destroy_session(self, session_id: str) -> None:
        with self.cond:
            if session_id in self.sessions:
                self._invalidate(self.sessions[session_id])

    def _invalidate(self, session: Session) -> None:
        del self.sessions[session.id]
        index = self._write()
        now = time.monotonic()
        for key, entry in list(self.kv.items()):
            if entry.session != session.id:
                continue
            self.lock_delay_until[key] = now + session.lock_delay
            if session.behavior == "delete":
                del self.kv[key]
            else:
                entry.session = None
                entry.modify_index = index
            self.kv_index = index

    def expire_sessions(self) -> None:
        with self.cond:
            if self.down:
                return  # a crashed cluster expires nothing; restart() resets the timers
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if session.expires is not None and session.expires <= now:
                    self._invalidate(session)

    def reset_timers(self) -> None:
        with self.cond:
            for session in self.sessions.values():
                if session.ttl is not None:
                    session.expires = time.monotonic() + session.ttl * self.ttl_multiplier

    # --- KV ---

    def kv_get(self, key: str, min_index: int = 0, wait: float = 0.0) -> tuple[int, dict | None]:
        deadline = time.monotonic() + wait
        with self.cond:
            while True:
                entry = self.kv.get(key)
                index = entry.modify_index if entry else self.kv_index
                remaining = deadline - time.monotonic()
                if min_index == 0 or index > min_index or remaining <= 0 or self.down:
                    return index, entry.to_json() if entry else None
                self.cond.wait(remaining)

    def kv_put(self, key, value: bytes, *, flags=0, cas=None, acquire=None, release=None) -> bool:
        with self.cond:
            entry = self.kv.get(key)
            if acquire is not None:
                if self.lock_delay_until.get(key, 0.0) > time.monotonic():
                    return False  # Consul checks lock-delay before the session
                if acquire not in self.sessions:
                    raise ApiError(500, f'invalid session "{acquire}"')
                if entry is not None and entry.session not in (None, acquire):
                    return False
                new_holder = entry is None or entry.session != acquire
            elif release is not None:
                if entry is None or entry.session != release:
                    return False
            elif cas is not None:
                if (cas == 0 and entry is not None) or (cas != 0 and (entry is None or entry.modify_index != cas)):
                    return False
            index = self._write()
            self.kv_index = index
            if entry is None:
                entry = self.kv[key] = Entry(key=key, create_index=index)
            entry.value, entry.flags, entry.modify_index = value, flags, index
            if acquire is not None:
                entry.session = acquire
                if new_holder:
                    entry.lock_index += 1
            if release is not None:
                entry.session = None
            return True

    def kv_delete(self, key: str, *, cas=None, recurse=False) -> bool:
        with self.cond:
            if cas is not None:
                entry = self.kv.get(key)
                if entry is None:
                    return True  # as Consul: nothing to delete counts as done
                if entry.modify_index != cas:
                    return False
            keys = [k for k in self.kv if k.startswith(key)] if recurse else [k for k in (key,) if k in self.kv]
            if keys:
                self.kv_index = self._write()
                for k in keys:
                    del self.kv[k]
            return True


class Handler(BaseHTTPRequestHandler):
    server_version = "consul-test"

    def log_message(self, format, *args) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        state: ConsulState = self.server.state
        url = urlsplit(self.path)
        path = unquote(url.path)
        params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            status, payload, index = self._route(state, method, path, params, body)
        except ApiError as error:
            status, payload, index = error.status, str(error), None
        except ValueError as error:  # a malformed number or JSON body
            status, payload, index = 400, str(error), None
        if state.down:  # crashed while the request waited: no answer at all
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if isinstance(payload, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        if index is not None:
            self.send_header("X-Consul-Index", str(index))
            self.send_header("X-Consul-KnownLeader", "true")
            self.send_header("X-Consul-LastContact", "0")
        self.end_headers()
        self.wfile.write(data)

    def _route(self, state: ConsulState, method: str, path: str, params: dict, body: bytes):
        """Returns (status, payload, X-Consul-Index or None); a str payload is sent as text."""
        if path.startswith("/v1/session/"):
            action, _, sid = path[len("/v1/session/") :].partition("/")
            if (method, action) == ("PUT", "create"):
                return 200, {"ID": state.create_session(json.loads(body) if body.strip() else {}).id}, None
            if (method, action) == ("PUT", "renew"):
                session = state.renew_session(sid)
                return (200, [session.to_json()], None) if session else (404, f"Session id '{sid}' not found", None)
            if (method, action) == ("PUT", "destroy"):
                state.destroy_session(sid)
                return 200, True, None
            if (method, action) == ("GET", "info"):
                with state.cond:
                    session = state.sessions.get(sid)
                    return 200, [session.to_json()] if session else [], state.index
        if path.startswith("/v1/kv/"):
            key = path[len("/v1/kv/") :]
            cas = int(params["cas"]) if "cas" in params else None
            if method == "GET":
                wait = min(parse_duration(params["wait"]) if "wait" in params else 300.0, 600.0)
                index, entry = state.kv_get(key, int(params.get("index") or 0), wait)
                return (200, [entry], index) if entry else (404, "", index)
            if method == "PUT":
                if sum(p in params for p in ("cas", "acquire", "release")) > 1:
                    raise ApiError(400, "use only one of cas, acquire, release")
                flags = int(params.get("flags") or 0)
                return (
                    200,
                    state.kv_put(
                        key, body, flags=flags, cas=cas, acquire=params.get("acquire"), release=params.get("release")
                    ),
                    None,
                )
            if method == "DELETE":
                return 200, state.kv_delete(key, cas=cas, recurse="recurse" in params), None
        return 404, f"no route for {method} {path}", None


class ConsulTestServer:
    """Start with `with ConsulTestServer() as server:`; point clients at server.address.

    crash() makes the whole server vanish (connections refused, blocked queries cut,
    no expiry meanwhile); restart() brings it back on the same port with its state,
    and resets session timers as a Consul leader failover does. To "kill" a client,
    just stop renewing its session: the server expires it after the TTL.
    """

    def __init__(self, *, ttl_multiplier: float = 1.0, min_ttl: float = 0.0) -> None:
        self.state = ConsulState(ttl_multiplier=ttl_multiplier, min_ttl=min_ttl)
        self.port = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._closed = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name="consul-test reaper", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ConsulTestServer:
        self._serve()
        self._reaper.start()
        return self

    def _serve(self) -> None:
        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        httpd.daemon_threads = True
        httpd.state = self.state
        self.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._httpd = httpd

    def _reap(self) -> None:
        while not self._closed.wait(0.01):
            self.state.expire_sessions()

    def crash(self) -> None:
        with self.state.cond:
            self.state.down = True
            self.state.cond.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()

    def restart(self) -> None:
        with self.state.cond:
            self.state.reset_timers()
            self.state.down = False
        self._serve()

    def close(self) -> None:
        self._closed.set()
        if not self.state.down:
            self.crash()

    def __enter__(self) -> ConsulTestServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
