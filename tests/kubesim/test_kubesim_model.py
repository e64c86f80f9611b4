"""The object store on its own: resourceVersions, concurrency, watch log, compaction, paging, patches."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesim.clock import ManualClock
from kubesim.errors import ApiError
from kubesim.jsoncodec import clone
from kubesim.model import Store, evolve
from kubesim.patch import apply_patch, json_patch, merge_patch
from kubesim.resources import LEASES
from kubesim.selectors import match_label_selector_object, parse_field_selector, parse_label_selector
from tests.examples import examples


def lease(name, holder="a", namespace="default"):
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": holder},
    }


@pytest.fixture
def store():
    return Store(ManualClock(), history=100)


def test_every_write_gets_a_higher_resource_version(store):
    a = store.create(LEASES, lease("a"))
    b = store.create(LEASES, lease("b"))
    a2 = store.update(LEASES, evolve(a, spec={"holderIdentity": "x"}))
    assert (
        int(a["metadata"]["resourceVersion"])
        < int(b["metadata"]["resourceVersion"])
        < int(a2["metadata"]["resourceVersion"])
    )
    assert a2["metadata"]["uid"] == a["metadata"]["uid"]
    assert a2["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"


def test_stale_update_is_a_conflict_and_changes_nothing(store):
    a = store.create(LEASES, lease("a"))
    store.update(LEASES, evolve(a, spec={"holderIdentity": "first"}), expected_rv=a["metadata"]["resourceVersion"])
    with pytest.raises(ApiError) as caught:
        store.update(LEASES, evolve(a, spec={"holderIdentity": "second"}), expected_rv=a["metadata"]["resourceVersion"])
    assert caught.value.code == 409 and caught.value.reason == "Conflict"
    assert store.get(LEASES, "default", "a")["spec"]["holderIdentity"] == "first"


def test_duplicate_create_and_missing_object(store):
    store.create(LEASES, lease("a"))
    with pytest.raises(ApiError) as dup:
        store.create(LEASES, lease("a"))
    assert (dup.value.code, dup.value.reason) == (409, "AlreadyExists")
    with pytest.raises(ApiError) as missing:
        store.get(LEASES, "default", "nope")
    assert (missing.value.code, missing.value.status()["details"]["name"]) == (404, "nope")


def test_watch_replays_every_event_after_a_version_in_order(store):
    a = store.create(LEASES, lease("a"))
    since = int(a["metadata"]["resourceVersion"])
    a = store.update(LEASES, evolve(a, spec={"holderIdentity": "b"}))
    store.create(LEASES, lease("other", namespace="elsewhere"))
    store.delete(LEASES, "default", "a")
    watcher, backlog = store.watch(LEASES, "default", since)
    assert [(e.type, e.obj["metadata"]["name"]) for e in backlog] == [("MODIFIED", "a"), ("DELETED", "a")]
    assert [e.rv for e in backlog] == sorted(e.rv for e in backlog)
    store.create(LEASES, lease("c"))
    live = watcher.queue.get(timeout=1)
    assert (live.type, live.obj["metadata"]["name"]) == ("ADDED", "c")
    watcher.close()
    assert store.watcher_count() == 0


def test_compaction_makes_old_versions_gone(store):
    a = store.create(LEASES, lease("a"))
    old = int(a["metadata"]["resourceVersion"])
    store.update(LEASES, evolve(a, spec={"holderIdentity": "z"}))
    store.compact()
    with pytest.raises(ApiError) as caught:
        store.watch(LEASES, None, old)
    assert caught.value.code == 410
    watcher, backlog = store.watch(LEASES, None, store.resource_version)  # the current version still works
    assert backlog == []
    watcher.close()


def test_history_bound_compacts_automatically():
    store = Store(ManualClock(), history=10)
    first = store.create(LEASES, lease("a"))
    for i in range(30):
        store.create(LEASES, lease(f"l{i}"))
    with pytest.raises(ApiError) as caught:
        store.watch(LEASES, None, int(first["metadata"]["resourceVersion"]))
    assert caught.value.code == 410


def test_paged_list_is_a_consistent_snapshot(store):
    for i in range(5):
        store.create(LEASES, lease(f"l{i}"))
    page, rv, token, remaining = store.list(LEASES, "default", limit=2)
    assert [o["metadata"]["name"] for o in page] == ["l0", "l1"] and remaining == 3
    # Changes after the first page are invisible to the rest of this list.
    store.delete(LEASES, "default", "l3")
    store.create(LEASES, lease("l2a"))
    store.update(LEASES, evolve(store.get(LEASES, "default", "l4"), spec={"holderIdentity": "new"}))
    rest, rv2, token2, _ = store.list(LEASES, "default", limit=10, continue_token=token)
    assert rv2 == rv and token2 is None
    assert [o["metadata"]["name"] for o in rest] == ["l2", "l3", "l4"]
    assert rest[-1]["spec"]["holderIdentity"] == "a"


def test_continue_token_after_compaction_is_gone(store):
    for i in range(3):
        store.create(LEASES, lease(f"l{i}"))
    _, _, token, _ = store.list(LEASES, None, limit=1)
    store.create(LEASES, lease("later"))
    store.compact()
    with pytest.raises(ApiError) as caught:
        store.list(LEASES, None, limit=1, continue_token=token)
    assert caught.value.code == 410 and "continue" in caught.value.message


operations = st.lists(st.tuples(st.sampled_from(["create", "update", "delete"]), st.integers(0, 4)), max_size=40)


@settings(max_examples=examples(60), deadline=None)
@given(operations, st.integers(1, 4))
def test_replaying_the_log_and_paging_reproduce_the_state(ops, page_size):
    store = Store(ManualClock(), history=1000)
    watcher, _ = store.watch(LEASES, None, 0)
    for op, i in ops:
        name = f"l{i}"
        current = store.find(LEASES, "default", name)
        if op == "create" and current is None:
            store.create(LEASES, lease(name))
        elif op == "update" and current is not None:
            store.update(LEASES, evolve(current, spec={"holderIdentity": f"h{store.resource_version}"}))
        elif op == "delete" and current is not None:
            store.delete(LEASES, "default", name)
    replayed, versions = {}, []
    while not watcher.queue.empty():
        event = watcher.queue.get()
        versions.append(event.rv)
        if event.type == "DELETED":
            replayed.pop(event.obj["metadata"]["name"])
        else:
            replayed[event.obj["metadata"]["name"]] = event.obj
    watcher.close()
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    items, _, token, _ = store.list(LEASES, None, limit=page_size)
    while token:
        more, _, token, _ = store.list(LEASES, None, limit=page_size, continue_token=token)
        items += more
    assert {o["metadata"]["name"]: o for o in items} == replayed


def test_label_selectors():
    labels = {"app": "tf", "tier": "gpu", "team": "a"}
    assert parse_label_selector("app=tf,tier in (gpu, cpu)")(labels)
    assert not parse_label_selector("app!=tf")(labels)
    assert parse_label_selector("team,!missing")(labels)
    assert not parse_label_selector("tier notin (gpu)")(labels)
    assert parse_label_selector("") is None
    with pytest.raises(ApiError):
        parse_label_selector("app=(")
    assert match_label_selector_object(
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}, labels
    )
    assert not match_label_selector_object({"matchLabels": {"team": "b"}}, labels)


def test_field_selectors_only_on_supported_fields():
    pod = {"metadata": {"name": "p", "namespace": "n"}, "status": {"phase": "Running"}, "spec": {}}
    fields = frozenset({"metadata.name", "status.phase"})
    assert parse_field_selector("status.phase=Running,metadata.name!=q", fields)(pod)
    assert not parse_field_selector("status.phase==Pending", fields)(pod)
    with pytest.raises(ApiError) as caught:
        parse_field_selector("spec.nodeName=x", fields)
    assert caught.value.code == 400 and "field label not supported" in caught.value.message


def test_merge_and_json_patch():
    doc = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert merge_patch(doc, {"a": {"b": None, "e": 2}, "d": "y"}) == {"a": {"c": [1, 2], "e": 2}, "d": "y"}
    patched = json_patch(
        doc,
        [
            {"op": "add", "path": "/a/c/-", "value": 3},
            {"op": "replace", "path": "/d", "value": "z"},
            {"op": "remove", "path": "/a/b"},
            {"op": "test", "path": "/d", "value": "z"},
        ],
    )
    assert patched == {"a": {"c": [1, 2, 3]}, "d": "z"}
    assert doc == {"a": {"b": 1, "c": [1, 2]}, "d": "x"}  # the target is never modified
    with pytest.raises(ApiError) as caught:
        apply_patch(doc, "application/json-patch+json", [{"op": "test", "path": "/d", "value": "nope"}])
    assert caught.value.code == 422
    with pytest.raises(ApiError) as unsupported:
        apply_patch(doc, "text/plain", {})
    assert unsupported.value.code == 415


def test_merge_patch_result_shares_nothing_with_the_stored_object():
    stored = {"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"k": "v"}}
    snapshot = clone(stored)
    result = apply_patch(stored, "application/merge-patch+json", {"spec": {"k": "w"}})
    result["metadata"]["labels"]["x"] = "changed"
    assert stored == snapshot


OWNERS = ["u1", "u2", "u3"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["create", "update", "delete"]),
            st.sampled_from(["a", "b", "c", "d"]),
            st.lists(st.sampled_from(OWNERS), max_size=2, unique=True),
        ),
        max_size=40,
    )
)
@settings(max_examples=150, deadline=None)
def test_the_dependents_index_is_what_a_scan_of_every_owner_reference_finds(ops):
    """The garbage collector's graph (Store.dependents) kept from the writes, against a scan
    of every object's ownerReferences: the same dependents, whatever was created, re-owned
    or deleted."""
    store = Store(ManualClock(), history=100)
    for op, name, owners in ops:
        obj = lease(name)
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": o, "uid": o} for o in owners]
        current = store.find(LEASES, "default", name)
        if op == "create" and current is None:
            store.create(LEASES, obj)
        elif op == "update" and current is not None:
            store.update(
                LEASES,
                evolve(
                    current, metadata={**current["metadata"], "ownerReferences": obj["metadata"]["ownerReferences"]}
                ),
            )
        elif op == "delete" and current is not None:
            store.delete(LEASES, "default", name)
    for uid in OWNERS:
        scanned = {
            ("leases", ("default", o["metadata"]["name"]))
            for o in store.items(LEASES)
            if any(ref["uid"] == uid for ref in o["metadata"].get("ownerReferences") or [])
        }
        assert set(store.dependents(uid)) == scanned


def test_deleting_an_owner_deletes_its_dependents_in_its_namespace_and_theirs_in_turn(sim):
    """Background cascading deletion through the API: a dependent by any ownerReference (not
    only the controller's) goes with its owner, and what it owned goes with it; an object
    owned by another stays; propagationPolicy Orphan keeps them.
    (Services own, leases are owned: a lease's delete collects nothing, by design.)"""
    from kubesim.resources import SERVICES

    api = sim.cluster.api

    def ref(owner):
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
        }

    def service(name, namespace="team-a", owners=()):
        body = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"port": 80}]},
        }
        body["metadata"]["ownerReferences"] = [ref(o) for o in owners]
        return api.create(SERVICES, namespace, body, internal=True)[0]

    def leased(name, namespace="team-a", owners=()):
        body = lease(name, namespace=namespace)
        body["metadata"]["ownerReferences"] = [ref(o) for o in owners]
        return api.create(LEASES, namespace, body, internal=True)[0]

    root = service("root")
    child = service("child", owners=[root])
    leased("grandchild", owners=[child])
    leased("shared", owners=[service("other"), root])
    leased("kept", owners=[service("parent")])
    api.delete(SERVICES, "team-a", "root")
    services = {o["metadata"]["name"] for o in sim.cluster.store.items(SERVICES, "team-a")}
    leases = {o["metadata"]["name"] for o in sim.cluster.store.items(LEASES)}
    assert "root" not in services and "child" not in services and "other" in services
    assert "grandchild" not in leases and "shared" not in leases
    assert "kept" in leases

    leased("orphaned", owners=[service("owner")])
    api.delete(SERVICES, "team-a", "owner", {"propagationPolicy": "Orphan"})
    assert sim.cluster.store.find(LEASES, "team-a", "orphaned") is not None
