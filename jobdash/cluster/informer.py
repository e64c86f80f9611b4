"""A watch-backed cache of one resource kind: list, then watch from the list's
resourceVersion; relist on 410 Gone; reconnect (with backoff) when a watch drops."""

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

log = logging.getLogger(__name__)

GONE = 410
NOT_FOUND = 404
NOT_SERVED_RETRY_S = 30.0
JOURNAL_LIMIT = 50_000  # journaled values kept undrained before the journal says "everything"


class Informer:
    def __init__(
        self,
        kind: str,
        list_call: Callable[..., Any],
        convert: Callable[[dict], Any],
        on_change: Callable[[str, str, str, str], None],
        *,
        page_size: int = 500,
        watch_seconds: int = 240,
        indexes: dict[str, Callable[[Any], Any]] | None = None,
        journal: tuple[str, ...] = (),
    ):
        self.kind = kind
        self._list_call = list_call  # a client list method that also accepts watch=True
        self._convert = convert
        self._on_change = on_change  # (kind, event type, namespace, name)
        self._page_size = page_size
        self._watch_seconds = watch_seconds
        self._items: dict[tuple[str, str], Any] = {}
        # Secondary indexes kept up to date with every event: name -> value -> {key: item}.
        # An index function returns the item's value, or None to leave it out.
        self._index_fns = dict(indexes or {})
        self._indexes: dict[str, dict[Any, dict[tuple[str, str], Any]]] = {name: {} for name in self._index_fns}
        # For the indexes in `journal`: the values whose items were added or changed since
        # the consumer last drained them (a relist counts every item), so that a consumer
        # looks at what changed instead of at every value. None once more than
        # JOURNAL_LIMIT values piled up (nobody drained: a standby dispatcher).
        self._changed: dict[str, set[Any] | None] = {name: set() for name in journal}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.synced = threading.Event()
        self._response = None  # the open watch, closed by stop() to unblock the thread
        self._thread: threading.Thread | None = None
        self.resource_version = ""
        self.served = True  # False while the cluster answers 404 for this resource
        # Counts the changes of what the cache holds: an event whose converted item equals the
        # one held (a status heartbeat, a field the conversion drops) is no change. The
        # dispatcher compares it between cycles to tell a quiet cluster from a busy one.
        self.revision = 0
        self.relists = 0
        self.watches = 0  # watch requests opened; a watch ending normally is followed by another
        self.reconnects = 0  # watches that broke with an error

    # --- reads ---

    def items(self) -> list[Any]:
        with self._lock:
            return list(self._items.values())

    def get(self, namespace: str, name: str) -> Any | None:
        with self._lock:
            return self._items.get((namespace, name))

    def indexed(self, index: str, values=None) -> dict[Any, list[Any]]:
        """The items of index `index` by value: for the given values (each present, maybe
        empty) or for all of them. One consistent moment."""
        with self._lock:
            buckets = self._indexes[index]
            if values is None:
                return {value: list(bucket.values()) for value, bucket in buckets.items()}
            return {value: list(buckets[value].values()) if value in buckets else [] for value in values}

    def index_values(self, index: str) -> set[Any]:
        """The values index `index` holds items for: a set copied at one moment, without
        visiting the items (the dispatcher asks each cycle which jobs have objects)."""
        with self._lock:
            return set(self._indexes[index])

    def drain_changed(self, index: str) -> set[Any] | None:
        """The values of journaled index `index` whose items were added or changed since
        the last call (one consumer), or None when there were too many to keep: look at
        every value then."""
        with self._lock:
            changed, self._changed[index] = self._changed[index], set()
            return changed

    def _index_add(self, key: tuple[str, str], item: Any) -> None:
        for name, fn in self._index_fns.items():
            value = fn(item)
            if value is not None:
                self._indexes[name].setdefault(value, {})[key] = item
                self._journal(name, value)

    def _journal(self, index: str, value: Any) -> None:
        changed = self._changed.get(index)
        if changed is None:  # not journaled, or already "everything"
            return
        changed.add(value)
        if len(changed) > JOURNAL_LIMIT:
            self._changed[index] = None  # nobody drains it: remember only "everything"

    def _index_remove(self, key: tuple[str, str], item: Any) -> None:
        for name, fn in self._index_fns.items():
            value = fn(item)
            if value is not None:
                bucket = self._indexes[name].get(value)
                if bucket is not None:
                    bucket.pop(key, None)
                    if not bucket:
                        del self._indexes[name][value]

    # --- lifecycle ---

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # already closed
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        backoff = 0.1
        need_list = True
        while not self._stopping.is_set():
            try:
                if need_list:
                    self._relist()
                    need_list = False
                self._watch_once()
                backoff = 0.1
            except ApiException as error:
                if error.status == GONE:
                    log.info("%s watch expired (410): relisting", self.kind)
                    need_list = True
                    continue
                if error.status == NOT_FOUND and need_list:
                    self._not_served()
                    continue
                need_list = need_list or not self.synced.is_set()
                backoff = self._pause(backoff, error)
            except Exception as error:  # connection dropped, timeout, bad chunk: watch again
                backoff = self._pause(backoff, error)

    def _not_served(self) -> None:
        """The cluster does not serve this resource (its CRD is not installed: a cluster
        without JobSet or Trainer): an empty cache, synced, and a look again now and then,
        so a CRD installed later is picked up without a restart."""
        if not self.synced.is_set():
            log.info("%s: not served by this cluster; looking again every %.0fs", self.kind, NOT_SERVED_RETRY_S)
        with self._lock:
            self._items = {}
            self._indexes = {name: {} for name in self._index_fns}
        self.served = False
        self.synced.set()
        self._stopping.wait(NOT_SERVED_RETRY_S)

    def _pause(self, backoff: float, error: Exception) -> float:
        if self._stopping.is_set():
            return backoff
        self.reconnects += 1
        log.info("%s watch interrupted (%s); retrying in %.1fs", self.kind, error.__class__.__name__, backoff)
        self._stopping.wait(backoff)
        return min(backoff * 2, 5.0)

    def _relist(self) -> None:
        items: dict[tuple[str, str], Any] = {}
        token = None
        while True:
            kwargs = {"limit": self._page_size, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            response = self._list_call(**kwargs)
            _raise_for_status(response)
            body = orjson.loads(response.data)
            for obj in body.get("items") or []:
                meta = obj["metadata"]
                items[(meta.get("namespace", ""), meta["name"])] = self._convert(obj)
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                break
        with self._lock:
            if items != self._items:
                self.revision += 1
            self._items = items
            self._indexes = {name: {} for name in self._index_fns}
            for key, item in items.items():
                self._index_add(key, item)
            self.resource_version = body["metadata"]["resourceVersion"]
        self.relists += 1
        self.served = True
        self.synced.set()
        self._on_change(self.kind, "RELISTED", "", "")

    def _watch_once(self) -> None:
        self.watches += 1
        # The client's Watch.stream(deserialize=False) trips over ERROR events (it looks
        # for a key only deserialisation adds), so read the stream here: same call, raw lines.
        response = self._list_call(
            watch=True,
            resource_version=self.resource_version,
            timeout_seconds=self._watch_seconds,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=(5, self._watch_seconds + 30),
        )
        self._response = response
        try:
            _raise_for_status(response)
            for line in iter_resp_lines(response):
                if self._stopping.is_set():
                    break
                if not line:
                    continue
                event = orjson.loads(line)  # a few times faster than json: every pod change is one
                if event["type"] == "ERROR":
                    status = event.get("object") or {}
                    raise ApiException(status=status.get("code", 500), reason=status.get("message", "watch error"))
                self._apply(event["type"], event["object"])
        finally:
            self._response = None
            response.close()
            response.release_conn()

    def _apply(self, type_: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        item = self._convert(obj) if type_ in ("ADDED", "MODIFIED") else None
        with self._lock:
            if type_ in ("DELETED", "ADDED", "MODIFIED"):
                old = self._items.pop(key, None)
                if old != item:
                    self.revision += 1
                if old is not None and self._index_fns:
                    self._index_remove(key, old)
            if item is not None:
                self._items[key] = item
                if self._index_fns:
                    self._index_add(key, item)
            if meta.get("resourceVersion"):
                self.resource_version = meta["resourceVersion"]
        if type_ != "BOOKMARK":
            self._on_change(self.kind, type_, key[0], key[1])

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return self.synced.wait(max(0.0, deadline - time.monotonic()))


def _raise_for_status(response) -> None:
    """Raw responses (_preload_content=False) are not checked by the client."""
    if 200 <= response.status < 300:
        return
    try:
        status = json.loads(response.data)
    except ValueError:
        status = {}
    raise ApiException(status=status.get("code", response.status), reason=status.get("message", response.reason))
