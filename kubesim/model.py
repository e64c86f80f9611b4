"""The in-memory object store: what etcd plus the API server's storage layer do.

- One cluster-wide resourceVersion counter, bumped by every write (etcd's revision).
- Optimistic concurrency: an update carrying a stale resourceVersion is a 409 Conflict.
- A bounded per-resource event log. A watch from resourceVersion R replays every event
  after R in order, then follows live; if R is older than the log (compacted) it is 410
  Gone. The same log lets a paged list serve later pages from the snapshot of its first
  page (undoing the events since), exactly as an etcd read at a revision would.
- Hooks run under the store lock after every write, in resourceVersion order; the quota
  tracker and the controllers' work queues are fed by them.

Stored objects are never mutated in place: every write stores a new dict. So the dicts
that ``get``/``list`` return are safe to serialize without a lock, and callers must
treat them as read-only (``clone`` before changing).
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import queue
import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from . import jsoncodec
from .clock import Clock, rfc3339
from .errors import already_exists, bad_request, conflict, gone, not_found
from .resources import ResourceType

Key = tuple[str, str]  # (namespace or "", name)


_uid_random = random.Random()


def new_uid() -> str:
    # uuid4's os.urandom costs ~0.1 ms here; uids need to be unique, not unguessable.
    return str(uuid.UUID(int=_uid_random.getrandbits(128), version=4))


def evolve(obj: dict, **parts) -> dict:
    """A new version of a stored object that shares its unchanged parts.

    The top level and metadata are fresh dicts (the store stamps metadata); ``parts``
    replace whole top-level fields and must themselves be new objects. Cheaper than a
    clone on the controllers' hot paths, and safe because stored objects are never mutated.
    """
    new = dict(obj)
    new["metadata"] = dict(obj["metadata"])
    new.update(parts)
    return new


def key_of(obj: dict) -> Key:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


@dataclass
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: dict
    prev: dict | None
    _json: bytes | None = field(default=None, repr=False)

    def object_json(self) -> bytes:
        # Serialized once, however many watchers receive the event.
        if self._json is None:
            self._json = jsoncodec.dumps(self.obj)
        return self._json


# Sentinels put on a watcher's queue by drop_watches: end the stream cleanly, or cut the connection.
END_WATCH = "end"
ABORT_WATCH = "abort"


class Watcher:
    """A live subscription: events arrive on ``queue``; a sentinel string means the stream was cut."""

    def __init__(self, store: Store, rt: ResourceType, namespace: str | None):
        self.store, self.rt, self.namespace = store, rt, namespace
        self.queue: queue.SimpleQueue = queue.SimpleQueue()

    def close(self) -> None:
        self.store._unregister(self)


class Store:
    def __init__(self, clock: Clock, history: int = 20000):
        self.clock = clock
        self.history = history
        self.lock = threading.RLock()
        self._rv = 0
        self._objects: dict[str, dict[Key, dict]] = {}
        self._log: dict[str, list[Event]] = {}
        # Events with rv > _compacted[plural] are all still in the log.
        self._compacted: dict[str, int] = {}
        self._compacted_all = 0  # set by compact(): applies to every resource
        self._watchers: dict[str, set[Watcher]] = {}
        self.hooks: list[Callable[[ResourceType, Event], None]] = []
        # owner uid -> its dependents (plural, key), in the order they came: what the garbage
        # collector's graph holds (every ownerReference, not only controllers), so that a
        # cascading delete looks at the owner's dependents, not at every object.
        self._dependents: dict[str, dict[tuple[str, Key], None]] = {}

    # --- reads ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, rt: ResourceType, namespace: str, name: str) -> dict:
        obj = self._objects.get(rt.plural, {}).get((namespace or "", name))
        if obj is None:
            raise not_found(rt.group, rt.plural, name)
        return obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> dict | None:
        return self._objects.get(rt.plural, {}).get((namespace or "", name))

    def dependents(self, uid: str) -> list[tuple[str, Key]]:
        """(plural, key) of the objects with an ownerReference to `uid`, oldest first."""
        with self.lock:
            return list(self._dependents.get(uid, ()))

    def items(self, rt: ResourceType, namespace: str | None = None) -> list[dict]:
        """Current objects (read-only), unordered; a cheap snapshot for controllers."""
        with self.lock:
            objects = list(self._objects.get(rt.plural, {}).values())
        if namespace is None:
            return objects
        return [o for o in objects if o["metadata"].get("namespace") == namespace]

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        predicate: Callable[[dict], bool] | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> tuple[list[dict], int, str | None, int | None]:
        """(items sorted by namespace/name, list resourceVersion, continue token, remaining count)."""
        with self.lock:
            if continue_token:
                snapshot_rv, start = self._decode_continue(rt, continue_token)
                objects = self._state_at(rt, snapshot_rv)
            else:
                snapshot_rv, start = self._rv, None
                objects = dict(self._objects.get(rt.plural, {}))
        keys = sorted(k for k in objects if namespace is None or k[0] == namespace)
        if start is not None:
            keys = [k for k in keys if k > start]
        selected = [objects[k] for k in keys]
        if predicate is not None:
            selected = [o for o in selected if predicate(o)]
        if limit and len(selected) > limit:
            page = selected[:limit]
            token = self._encode_continue(snapshot_rv, key_of(page[-1]))
            return page, snapshot_rv, token, len(selected) - limit
        return selected, snapshot_rv, None, None

    def _encode_continue(self, rv: int, start: Key) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(start)}).encode()
        return base64.urlsafe_b64encode(raw).decode()

    def _decode_continue(self, rt: ResourceType, token: str) -> tuple[int, Key]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            rv, start = int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
        except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
            raise bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
            ) from None
        if rv < self._floor(rt):
            raise gone(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
        return rv, start

    def _state_at(self, rt: ResourceType, rv: int) -> dict[Key, dict]:
        """The objects of one resource as they were at ``rv``: current state minus later events."""
        state = dict(self._objects.get(rt.plural, {}))
        for event in reversed(self._log.get(rt.plural, [])):
            if event.rv <= rv:
                break
            key = key_of(event.obj)
            if event.type == "ADDED":
                state.pop(key, None)
            else:  # MODIFIED or DELETED: restore what was there before
                state[key] = event.prev
        return state

    # --- writes --------------------------------------------------------------------------

    def create(self, rt: ResourceType, obj: dict) -> dict:
        """Store a new object (already validated); stamps uid (unless the API layer already
        assigned one), resourceVersion, creationTimestamp."""
        with self.lock:
            key = key_of(obj)
            objects = self._objects.setdefault(rt.plural, {})
            if key in objects:
                raise already_exists(rt.group, rt.plural, key[1])
            meta = obj["metadata"]
            meta["uid"] = meta.get("uid") or new_uid()
            meta["creationTimestamp"] = rfc3339(self.clock.now())
            meta.setdefault("generation", 1)
            return self._commit(rt, key, "ADDED", obj, None)

    def update(self, rt: ResourceType, obj: dict, expected_rv: str | None = None) -> dict:
        """Replace an object; with ``expected_rv`` the write fails with 409 if it is stale."""
        with self.lock:
            key = key_of(obj)
            current = self._objects.get(rt.plural, {}).get(key)
            if current is None:
                raise not_found(rt.group, rt.plural, key[1])
            if expected_rv is not None and str(expected_rv) != current["metadata"]["resourceVersion"]:
                raise conflict(rt.group, rt.plural, key[1])
            meta = obj["metadata"]
            for immutable in ("uid", "creationTimestamp"):
                meta[immutable] = current["metadata"][immutable]
            if "deletionTimestamp" in current["metadata"]:
                meta["deletionTimestamp"] = current["metadata"]["deletionTimestamp"]
            return self._commit(rt, key, "MODIFIED", obj, current)

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        expected_rv: str | None = None,
        expected_uid: str | None = None,
    ) -> dict:
        with self.lock:
            key = (namespace or "", name)
            current = self._objects.get(rt.plural, {}).get(key)
            if current is None:
                raise not_found(rt.group, rt.plural, name)
            if expected_uid is not None and expected_uid != current["metadata"]["uid"]:
                raise conflict(rt.group, rt.plural, name)
            if expected_rv is not None and str(expected_rv) != current["metadata"]["resourceVersion"]:
                raise conflict(rt.group, rt.plural, name)
            # The DELETED event carries the object at a new resourceVersion, like the API server.
            final = dict(current)
            final["metadata"] = dict(current["metadata"])
            return self._commit(rt, key, "DELETED", final, current)

    def _commit(self, rt: ResourceType, key: Key, etype: str, obj: dict, prev: dict | None) -> dict:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        objects = self._objects.setdefault(rt.plural, {})
        if etype == "DELETED":
            del objects[key]
        else:
            objects[key] = obj
        self._index_owners(rt.plural, key, prev, None if etype == "DELETED" else obj)
        event = Event(self._rv, etype, obj, prev)
        log = self._log.setdefault(rt.plural, [])
        log.append(event)
        if len(log) > self.history:
            # Drop the oldest half at once so trimming stays amortized O(1).
            cut = len(log) - self.history // 2
            self._compacted[rt.plural] = log[cut - 1].rv
            del log[:cut]
        for watcher in self._watchers.get(rt.plural, ()):
            if watcher.namespace is None or watcher.namespace == key[0]:
                watcher.queue.put(event)
        for hook in self.hooks:
            hook(rt, event)
        return obj

    def _index_owners(self, plural: str, key: Key, before: dict | None, after: dict | None) -> None:
        old, new = _owner_uids(before), _owner_uids(after)
        if old == new:
            return
        for uid in old:
            if uid not in new and (dependents := self._dependents.get(uid)) is not None:
                dependents.pop((plural, key), None)
                if not dependents:
                    del self._dependents[uid]
        for uid in new:
            self._dependents.setdefault(uid, {})[(plural, key)] = None

    def compact(self, rv: int | None = None) -> int:
        """Forget events up to ``rv`` (default: all), like etcd compaction; older watches get 410."""
        with self.lock:
            rv = self._rv if rv is None else rv
            for plural, log in self._log.items():
                self._log[plural] = [e for e in log if e.rv > rv]
            self._compacted_all = max(self._compacted_all, rv)
            return rv

    def _floor(self, rt: ResourceType) -> int:
        return max(self._compacted.get(rt.plural, 0), self._compacted_all)

    # --- watches -------------------------------------------------------------------------

    def watch(
        self, rt: ResourceType, namespace: str | None, since: int | None
    ) -> tuple[Watcher, builtins.list[Event]]:  # Store.list hides the builtin
        """Subscribe; returns the watcher and the backlog to send first.

        ``since`` None means 'from now, after a synthetic ADDED for every current object'
        (resourceVersion unset or "0"); otherwise every event after ``since``, or 410.
        """
        with self.lock:
            if since is None:
                backlog = [
                    Event(int(o["metadata"]["resourceVersion"]), "ADDED", o, None)
                    for k, o in sorted(self._objects.get(rt.plural, {}).items())
                    if namespace is None or k[0] == namespace
                ]
            else:
                if since < self._floor(rt):
                    raise gone(f"too old resource version: {since} ({self._floor(rt) + 1})")
                backlog = [
                    e
                    for e in self._log.get(rt.plural, [])
                    if e.rv > since and (namespace is None or key_of(e.obj)[0] == namespace)
                ]
            watcher = Watcher(self, rt, namespace)
            self._watchers.setdefault(rt.plural, set()).add(watcher)
            return watcher, backlog

    def _unregister(self, watcher: Watcher) -> None:
        with self.lock:
            self._watchers.get(watcher.rt.plural, set()).discard(watcher)

    def drop_watches(self, abrupt: bool = False) -> int:
        """End every open watch (fault injection): cleanly, or (abrupt) by cutting the connection."""
        with self.lock:
            watchers = [w for ws in self._watchers.values() for w in ws]
            for ws in self._watchers.values():
                ws.clear()
        for watcher in watchers:
            watcher.queue.put(ABORT_WATCH if abrupt else END_WATCH)
        return len(watchers)

    def watcher_count(self) -> int:
        with self.lock:
            return sum(len(ws) for ws in self._watchers.values())


def owned_by(obj: dict, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


def _owner_uids(obj: dict | None) -> tuple[str, ...]:
    if obj is None:
        return ()
    refs = obj["metadata"].get("ownerReferences")
    if not refs or not isinstance(refs, list):
        return ()
    return tuple(uid for ref in refs if isinstance(ref, dict) and isinstance(uid := ref.get("uid"), str))
