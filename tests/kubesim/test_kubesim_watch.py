"""Watches through kubernetes.watch.Watch: ordering, 410 Gone, bookmarks, selectors, dropped connections."""

import json
import queue
import threading

import pytest
import urllib3
from kubernetes import client, watch

from kubesim.testing import running_kubesim, tfjob_manifest

G, V, P = "kubeflow.org", "v1", "tfjobs"


def test_watch_from_a_resource_version_sees_every_change_in_order(custom):
    first = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("before", "team-a", suspend=True))
    since = first["metadata"]["resourceVersion"]
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("w", "team-a", suspend=True))
    for i in range(3):
        custom.patch_namespaced_custom_object(G, V, "team-a", P, "w", {"metadata": {"labels": {"step": str(i)}}})
    custom.delete_namespaced_custom_object(G, V, "team-a", P, "w")
    seen = []
    w = watch.Watch()
    for event in w.stream(
        custom.list_namespaced_custom_object, G, V, "team-a", P, resource_version=since, timeout_seconds=5
    ):
        obj = event["object"]
        if obj["metadata"]["name"] == "w":
            seen.append(
                (
                    event["type"],
                    (obj["metadata"].get("labels") or {}).get("step"),
                    int(obj["metadata"]["resourceVersion"]),
                )
            )
        if event["type"] == "DELETED":
            w.stop()
    assert [(t, s) for t, s, _ in seen] == [
        ("ADDED", None),
        ("MODIFIED", "0"),
        ("MODIFIED", "1"),
        ("MODIFIED", "2"),
        ("DELETED", "2"),
    ]
    versions = [rv for _, _, rv in seen]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert "before" not in [e for e in seen]  # the object at `since` itself is not replayed


def test_watch_without_a_version_starts_with_the_current_objects(custom, core, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("now", "team-a", workers=2))
    sim.advance(5)
    events = list(watch.Watch().stream(core.list_namespaced_pod, "team-a", timeout_seconds=1))
    assert sorted((e["type"], e["object"].metadata.name, e["object"].status.phase) for e in events) == [
        ("ADDED", "now-worker-0", "Running"),
        ("ADDED", "now-worker-1", "Running"),
    ]
    assert isinstance(events[0]["object"], client.V1Pod)


def test_watch_from_a_compacted_version_is_410(custom, sim):
    job = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("c", "team-a", suspend=True))
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "c", {"metadata": {"labels": {"a": "b"}}})
    sim.model.compact()
    with pytest.raises(client.ApiException) as caught:
        for _ in watch.Watch().stream(
            custom.list_namespaced_custom_object,
            G,
            V,
            "team-a",
            P,
            resource_version=job["metadata"]["resourceVersion"],
            timeout_seconds=5,
        ):
            pass
    assert caught.value.status == 410


def test_selectors_turn_modifications_into_added_and_deleted(custom):
    job = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("sel", "team-a", suspend=True))
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("other", "team-a", suspend=True, labels={"queue": "jobdash"})
    )
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "sel", {"metadata": {"labels": {"queue": "jobdash"}}})
    custom.patch_namespaced_custom_object(
        G, V, "team-a", P, "sel", {"metadata": {"labels": {"queue": "jobdash", "x": "1"}}}
    )
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "sel", {"metadata": {"labels": {"queue": None}}})
    events = list(
        watch.Watch().stream(
            custom.list_namespaced_custom_object,
            G,
            V,
            "team-a",
            P,
            resource_version=job["metadata"]["resourceVersion"],
            timeout_seconds=1,
            label_selector="queue=jobdash",
            field_selector="metadata.name=sel",
        )
    )
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]


@pytest.fixture
def bookmark_config(config):
    return {**config, "watch": {"bookmark_interval_seconds": 0.2}}


def test_bookmarks_carry_the_current_resource_version(bookmark_config, custom):
    with running_kubesim(bookmark_config, manual_clock=True) as sim:
        api = client.CustomObjectsApi(sim.api_client())
        api.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("b", "team-a", suspend=True))
        sim.settle()
        events = list(
            watch.Watch().stream(
                api.list_namespaced_custom_object,
                G,
                V,
                "team-a",
                P,
                resource_version=str(sim.model.resource_version),
                allow_watch_bookmarks=True,
                timeout_seconds=1,
            )
        )
        bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
        assert bookmarks and all(
            e["object"]["metadata"]["resourceVersion"] == str(sim.model.resource_version) for e in bookmarks
        )
        assert all(e["type"] == "BOOKMARK" for e in events)


def _collect(stream, into: queue.Queue) -> None:
    try:
        for event in stream:
            into.put((event["type"], event["object"]["metadata"]["name"]))
    except Exception as exc:  # the test reads what ended the stream
        into.put(("EXCEPTION", exc))
    into.put(("END", None))


def test_a_dropped_watch_resumes_from_the_last_version_without_gaps(custom, sim):
    start = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("d0", "team-a", suspend=True))
    events: queue.Queue = queue.Queue()
    w = watch.Watch()
    stream = w.stream(
        custom.list_namespaced_custom_object, G, V, "team-a", P, resource_version=start["metadata"]["resourceVersion"]
    )  # no timeout: the client reconnects
    threading.Thread(target=_collect, args=(stream, events), daemon=True).start()
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("d1", "team-a", suspend=True))
    assert events.get(timeout=5) == ("ADDED", "d1")
    assert sim.cluster.drop_watches() == 1
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("d2", "team-a", suspend=True))
    assert events.get(timeout=5) == ("ADDED", "d2")  # seen after the client's reconnect, d1 not repeated
    assert sim.server.watches == 2
    w.stop()  # shuts the socket down; the stream ends (the client may report the cut)
    while (item := events.get(timeout=5))[0] != "END":
        assert item[0] == "EXCEPTION"


def test_an_abruptly_cut_watch_surfaces_as_a_connection_error(custom, sim):
    start = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("a0", "team-a", suspend=True))
    events: queue.Queue = queue.Queue()
    stream = watch.Watch().stream(
        custom.list_namespaced_custom_object,
        G,
        V,
        "team-a",
        P,
        resource_version=start["metadata"]["resourceVersion"],
        timeout_seconds=30,
    )
    threading.Thread(target=_collect, args=(stream, events), daemon=True).start()
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("a1", "team-a", suspend=True))
    assert events.get(timeout=5) == ("ADDED", "a1")
    sim.cluster.drop_watches(abrupt=True)
    kind, error = events.get(timeout=5)
    assert kind == "EXCEPTION" and isinstance(error, (urllib3.exceptions.HTTPError, OSError))


def test_watching_a_single_object_by_name(core, custom, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("one", "team-a", workers=2))
    sim.settle()
    rv = core.list_namespaced_pod("team-a").metadata.resource_version
    sim.advance(3)  # both pods start
    events = list(
        watch.Watch().stream(
            core.list_namespaced_pod,
            "team-a",
            resource_version=rv,
            field_selector="metadata.name=one-worker-1",
            timeout_seconds=1,
        )
    )
    assert {e["object"].metadata.name for e in events} == {"one-worker-1"}
    assert events[-1]["object"].status.phase == "Running"


def test_a_burst_of_events_goes_out_in_one_chunk_in_order(sim):
    """The events queued while a stream was busy are written together (one chunk, one
    system call), each still its own line, in resourceVersion order."""
    from kubesim.resources import TFJOBS

    api = sim.cluster.api
    since = sim.model.resource_version
    stream = api.watch(TFJOBS, "team-a", str(since), timeout_seconds=5)
    try:
        for name in ("b1", "b2", "b3"):
            api.create(TFJOBS, "team-a", tfjob_manifest(name, "team-a", suspend=True), internal=True)
        chunk = next(stream)  # the backlog: the three ADDED and what the operator wrote since
        lines = chunk.splitlines()
        assert len(lines) >= 3 and chunk.endswith(b"\n")
        events = [json.loads(line) for line in lines]
        added = [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"]
        assert added == ["b1", "b2", "b3"]
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert versions == sorted(versions)
        api.create(TFJOBS, "team-a", tfjob_manifest("b4", "team-a", suspend=True), internal=True)
        api.create(TFJOBS, "team-a", tfjob_manifest("b5", "team-a", suspend=True), internal=True)
        later = [json.loads(line) for line in next(stream).splitlines()]  # queued while no one read
        assert [e["object"]["metadata"]["name"] for e in later if e["type"] == "ADDED"] == ["b4", "b5"]
    finally:
        stream.close()
