"""What kubesim's job controllers share: a work queue, fair interleaved creations, backoff, events.

Each controller reconciles the objects of its kinds whose object or children changed
(children: objects whose ``controller`` owner reference points at one of them).
``sync`` brings one object up to date and returns the children still to be created;
those creations are interleaved round-robin, one per object per turn, because real
controllers reconcile objects concurrently. A creation the API refuses (e.g. 403 from a
ResourceQuota) ends that object's turn and retries it with exponential backoff, as a
rate-limited work queue does, and is recorded as a Warning event on the object.
Together that is what produces the partial gangs of the deadlock.
"""

from __future__ import annotations

import threading
from collections import deque

from .api import Api
from .clock import rfc3339
from .errors import ApiError
from .model import Event, evolve
from .ownership import Owners, controller_ref, ref_type
from .resources import EVENTS, TFJOBS, ResourceType

Key = tuple[str, str, str]  # (plural, namespace, name)
Creation = tuple[ResourceType, dict]  # a child to create: its type and manifest


class Reconciler:
    name = "reconciler"
    failed_create_reason = "FailedCreate"

    def __init__(
        self,
        api: Api,
        owners: Owners,
        kinds: tuple[ResourceType, ...],
        children: tuple[ResourceType, ...],
        backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 30.0,
    ):
        self.api, self.store, self.owners = api, api.store, owners
        self.kinds = {rt.plural: rt for rt in kinds}
        self.child_kinds = {rt.plural for rt in children}
        self.backoff, self.max_backoff = backoff_seconds, max_backoff_seconds
        self._lock = threading.Lock()
        self._dirty: set[Key] = set()
        self._order: dict[Key, int] = {}  # first-seen resourceVersion: a stable, fair turn order
        self._retry: dict[Key, tuple[float, int]] = {}  # key -> (retry at, failed attempts)
        self._wake: dict[Key, float] = {}  # key -> when sync wants to look again (e.g. a pod backoff)
        self.store.hooks.append(self._on_event)

    # --- the work queue ------------------------------------------------------------------------

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        meta = event.obj["metadata"]
        if rt.plural in self.kinds:
            key = (rt.plural, meta.get("namespace") or "", meta["name"])
            with self._lock:
                if event.type == "ADDED":
                    self._order[key] = event.rv
                elif event.type == "DELETED":
                    self._order.pop(key, None)
                    self._retry.pop(key, None)
                    self._wake.pop(key, None)
                self._dirty.add(key)
            if event.type == "DELETED":
                self.forget(event.obj)
        elif rt.plural in self.child_kinds:
            ref = controller_ref(event.obj)
            owner_rt = ref_type(ref)
            if ref is not None and owner_rt is not None and owner_rt.plural in self.kinds:
                with self._lock:
                    self._dirty.add((owner_rt.plural, meta.get("namespace") or "", ref.get("name", "")))

    def forget(self, obj: dict) -> None:
        """An object of this controller's kinds was deleted (drop per-object memory)."""

    def mark_dirty(self, key: Key) -> None:
        with self._lock:
            self._dirty.add(key)

    def wake_at(self, key: Key, at: float) -> None:
        with self._lock:
            self._wake[key] = min(at, self._wake.get(key, at))

    def next_deadline(self) -> float | None:
        if not self._retry and not self._wake:  # the common case, checked without the lock
            return None
        with self._lock:
            retry = min((at for at, _ in self._retry.values()), default=None)
            wake = min(self._wake.values(), default=None)
        return retry if wake is None else wake if retry is None else min(retry, wake)

    def step(self, now: float) -> bool:
        if not self._dirty and not self._retry and not self._wake:  # nothing to do: skip the lock
            return False
        with self._lock:
            keys = set(self._dirty)
            self._dirty.clear()
            keys.update(k for k, (at, _) in self._retry.items() if at <= now)
            due = [k for k, at in self._wake.items() if at <= now]
            for k in due:
                del self._wake[k]
            keys.update(due)
            order = {k: self._order.get(k, 0) for k in keys}
        if not keys:
            return False
        turns: dict[Key, deque] = {}
        for key in sorted(keys, key=lambda k: (order.get(k, 0), k)):
            rt = self.kinds[key[0]]
            obj = self.store.find(rt, key[1], key[2])
            if obj is None:
                with self._lock:
                    self._retry.pop(key, None)
                continue
            with self._lock:
                retry = self._retry.get(key)
            missing = self.sync(rt, obj, now)
            if missing:
                turns[key] = deque(missing)
            else:
                with self._lock:
                    if self._retry.get(key) is retry:  # unless sync itself failed and backed off
                        self._retry.pop(key, None)
        self._create_round_robin(turns, now)
        return True

    def sync(self, rt: ResourceType, obj: dict, now: float) -> list[Creation]:  # pragma: no cover - interface
        raise NotImplementedError

    # --- creating children ------------------------------------------------------------------------

    def _create_round_robin(self, turns: dict[Key, deque], now: float) -> None:
        while turns:
            for key in list(turns):
                child_rt, manifest = turns[key].popleft()
                owner = self.store.find(self.kinds[key[0]], key[1], key[2])
                ref = controller_ref(manifest) or {}
                if owner is None or owner["metadata"]["uid"] != ref.get("uid"):
                    del turns[key]  # deleted (or replaced) since this round began
                    continue
                try:
                    self.api.create(child_rt, key[1], manifest, internal=True, record=False)
                except ApiError as exc:
                    if exc.code != 409:  # AlreadyExists: someone else made it; nothing to retry
                        self.failed_create(key, child_rt, manifest, exc, now)
                        del turns[key]
                        continue
                if not turns[key]:
                    del turns[key]
                    with self._lock:
                        self._retry.pop(key, None)

    def failed_create(self, key: Key, child_rt: ResourceType, manifest: dict, exc: ApiError, now: float) -> None:
        with self._lock:
            _, attempts = self._retry.get(key, (0.0, 0))
            delay = min(self.backoff * (2 ** min(attempts, 32)), self.max_backoff)
            self._retry[key] = (now + delay, attempts + 1)
        self.record_event(key, "Warning", self.failed_create_reason, self.failed_create_message(exc, child_rt), now)

    def failed_create_message(self, exc: ApiError, child_rt: ResourceType) -> str:
        return f"Error creating: {exc.message}"

    # --- events, status ----------------------------------------------------------------------------

    def event_source(self, rt: ResourceType) -> str:
        return self.name

    def record_event(self, key: Key, etype: str, reason: str, message: str, now: float) -> None:
        """A core/v1 Event on the object, deduplicated by reason with a count, like the event recorder."""
        rt = self.kinds[key[0]]
        obj = self.store.find(rt, key[1], key[2])
        if obj is None:
            return
        # TFJob events keep their historical names; other kinds' names include the kind.
        name = f"{key[2]}.{reason.lower()}" if rt is TFJOBS else f"{key[2]}.{rt.kind.lower()}.{reason.lower()}"
        stamp = rfc3339(now)
        source = self.event_source(rt)
        with self.store.lock:
            existing = self.store.find(EVENTS, key[1], name)
            if existing is not None:
                updated = evolve(existing, count=existing.get("count", 1) + 1, lastTimestamp=stamp, message=message)
                self.store.update(EVENTS, updated)
                return
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": key[1]},
                "involvedObject": {
                    "apiVersion": rt.api_version,
                    "kind": rt.kind,
                    "name": key[2],
                    "namespace": key[1],
                    "uid": obj["metadata"]["uid"],
                },
                "reason": reason,
                "message": message,
                "type": etype,
                "count": 1,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "source": {"component": source},
                "reportingComponent": source,
            }
            self.store.create(EVENTS, event)

    def write_status(self, rt: ResourceType, obj: dict, status: dict) -> dict:
        """Store a changed status (optimistically; a conflict just reconciles again)."""
        if status == (obj.get("status") or {}):
            return obj
        try:
            return self.store.update(rt, evolve(obj, status=status), expected_rv=obj["metadata"]["resourceVersion"])
        except ApiError:
            self.mark_dirty((rt.plural, obj["metadata"].get("namespace") or "", obj["metadata"]["name"]))
            return obj

    def delete(self, rt: ResourceType, obj: dict) -> None:
        try:
            self.api.delete(rt, obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        except ApiError:
            pass

    def replace(self, rt: ResourceType, obj: dict, subresource: str = "") -> dict | None:
        """Update a child (its spec, or its status with ``subresource="status"``) through the
        API: validation applies, webhooks do not. On a refusal the owner reconciles again."""
        try:
            updated, _ = self.api.replace(
                rt,
                obj["metadata"].get("namespace") or "",
                obj["metadata"]["name"],
                obj,
                subresource=subresource,
                internal=True,
            )
            return updated
        except ApiError:
            ref = controller_ref(obj) or {}
            owner_rt = ref_type(ref)
            if owner_rt is not None and owner_rt.plural in self.kinds:
                self.mark_dirty((owner_rt.plural, obj["metadata"].get("namespace") or "", ref.get("name", "")))
            return None
