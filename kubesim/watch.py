"""The watch verb: a store's events for one resource as the chunks of newline-delimited
JSON the API server streams, with its selectors, bookmarks, streaming lists
(sendInitialEvents) and the ends fault injection puts to a stream.

``Api.watch`` parses the request's selectors and hands over here; kubesim's HTTP server
writes each chunk as one chunk of a chunked reply.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator

from . import jsoncodec
from .errors import ApiError, bad_request
from .model import ABORT_WATCH, Event, Store
from .resources import ResourceType


def watch_stream(
    store: Store,
    rt: ResourceType,
    namespace: str | None,
    resource_version: str | None,
    predicate,
    timeout_seconds: float | None,
    bookmarks: bool,
    bookmark_interval: float,
    initial_events: bool,
) -> Iterator[bytes]:
    """Newline-delimited watch events, in chunks of one or more; a 410 becomes an ERROR
    event, as the API server sends it.
    ``initial_events`` (sendInitialEvents, a streaming list): ADDED for the current state, then
    a BOOKMARK annotated ``k8s.io/initial-events-end``, which client-go's reflector waits for."""
    since = None
    if resource_version not in (None, "", "0"):
        try:
            since = int(resource_version)
        except ValueError:
            raise bad_request(f"invalid resource version {resource_version!r}") from None
    try:
        with store.lock:
            watcher, backlog = store.watch(rt, namespace, None if initial_events else since)
            end = store.resource_version if initial_events else None
    except ApiError as exc:
        return iter([_line("ERROR", exc.status())])
    return _stream(store, rt, watcher, backlog, predicate, timeout_seconds, bookmarks, bookmark_interval, end)


def _stream(store: Store, rt, watcher, backlog, predicate, timeout_seconds, bookmarks, bookmark_interval, end=None):
    deadline = time.monotonic() + (timeout_seconds if timeout_seconds else 1800.0)
    try:
        for start in range(0, len(backlog), _BATCH):
            if chunk := _chunk(backlog[start : start + _BATCH], predicate):
                yield chunk
        if end is not None:
            meta = {"resourceVersion": str(end), "annotations": {"k8s.io/initial-events-end": "true"}}
            yield _line("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                event = watcher.queue.get(timeout=min(remaining, bookmark_interval))
            except queue.Empty:
                if bookmarks and (line := _bookmark(store, rt, watcher)):
                    yield line
                continue
            # The events queued meanwhile go out with this one: a burst is one chunk and
            # one write (clients split a chunk into lines, as the API server's may hold several).
            events, marker = _drain(watcher.queue, event)
            if chunk := _chunk(events, predicate):
                yield chunk
            if marker is not None:  # dropped by fault injection
                if marker == ABORT_WATCH:  # a connection cut mid-stream
                    raise ConnectionAbortedError("watch dropped by fault injection")
                return  # END_WATCH: a clean end of stream
        if bookmarks and (line := _bookmark(store, rt, watcher)):
            yield line
    finally:
        watcher.close()


def _bookmark(store: Store, rt: ResourceType, watcher) -> bytes:
    # Queue puts happen under the store lock, so an empty queue read under it means
    # every event up to the current resourceVersion has been delivered.
    with store.lock:
        rv = store.resource_version if watcher.queue.empty() else None
    if rv is None:
        return b""
    return _line("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(rv)}})


def _line(etype: str, obj: dict) -> bytes:
    return jsoncodec.dumps({"type": etype, "object": obj}) + b"\n"


_BATCH = 256  # watch events written at most in one chunk


def _drain(pending: queue.Queue, first: Event | str) -> tuple[list[Event], str | None]:
    """`first` and the events queued behind it, up to _BATCH, and the fault's marker
    (END_WATCH, ABORT_WATCH) that ended them, if one did."""
    events: list[Event] = []
    item = first
    while not isinstance(item, str):
        events.append(item)
        if len(events) >= _BATCH:
            return events, None
        try:
            item = pending.get_nowait()
        except queue.Empty:
            return events, None
    return events, item


def _chunk(events: list[Event], predicate) -> bytes:
    return b"".join(_event_line(event, predicate) for event in events)


def _event_line(event: Event, predicate) -> bytes:
    etype = event.type
    if predicate is not None:
        now_matches = etype != "DELETED" and predicate(event.obj)
        before = event.prev is not None and predicate(event.prev)
        if etype == "DELETED":
            if not before:
                return b""
        elif etype == "MODIFIED" and now_matches != before:
            if now_matches:
                etype = "ADDED"
            else:
                # Left the selection: a DELETED of the last matching state, at the new version.
                assert event.prev is not None  # it matched before, so there is a before
                gone_obj = {**event.prev, "metadata": {**event.prev["metadata"], "resourceVersion": str(event.rv)}}
                return _line("DELETED", gone_obj)
        elif not now_matches:
            return b""
    return b'{"type":"' + etype.encode() + b'","object":' + event.object_json() + b"}\n"
