"""Who controls whom: an index of objects by their controller's uid, kept from store events.

Controllers find their children (a Job's pods, a JobSet's Jobs, a TrainJob's JobSet) by
the ``controller: true`` owner reference, as the real ones do through their informers'
indexes; the work clock walks the same references up to find the workload a pod
belongs to (pod -> Job -> JobSet -> TrainJob).
"""

from __future__ import annotations

import threading

from .model import Event, Store
from .resources import BY_API_VERSION_KIND, ResourceType

ChildKey = tuple[str, str]  # (plural, name); children live in their owner's namespace


def controller_ref(obj: dict) -> dict | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def ref_type(ref: dict | None) -> ResourceType | None:
    """The served type an owner reference points at, if any."""
    if ref is None:
        return None
    return BY_API_VERSION_KIND.get((str(ref.get("apiVersion", "")), str(ref.get("kind", ""))))


class Owners:
    def __init__(self, store: Store, tracked: tuple[ResourceType, ...]):
        self.store = store
        self._tracked = {rt.plural: rt for rt in tracked}
        self._lock = threading.Lock()
        self._children: dict[str, set[ChildKey]] = {}  # controller uid -> its children
        self._owner_of: dict[tuple[str, str, str], str] = {}  # (plural, ns, name) -> controller uid
        store.hooks.append(self._on_event)

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        if rt.plural not in self._tracked:
            return
        meta = event.obj["metadata"]
        key = (rt.plural, meta.get("namespace") or "", meta["name"])
        ref = controller_ref(event.obj) if event.type != "DELETED" else None
        uid = ref.get("uid") if ref else None
        with self._lock:
            old = self._owner_of.get(key)
            if old == uid:
                return
            if old is not None:
                children = self._children.get(old)
                if children is not None:
                    children.discard((rt.plural, meta["name"]))
                    if not children:
                        del self._children[old]
                del self._owner_of[key]
            if uid is not None:
                self._owner_of[key] = uid
                self._children.setdefault(uid, set()).add((rt.plural, meta["name"]))

    def children(self, owner: dict, rt: ResourceType) -> list[dict]:
        """The objects of type ``rt`` that ``owner`` controls, sorted by name."""
        uid = owner["metadata"]["uid"]
        namespace = owner["metadata"].get("namespace") or ""
        with self._lock:
            names = sorted(name for plural, name in self._children.get(uid, ()) if plural == rt.plural)
        found = []
        for name in names:
            obj = self.store.find(rt, namespace, name)
            if obj is not None and (controller_ref(obj) or {}).get("uid") == uid:
                found.append(obj)
        return found

    def owner(self, obj: dict) -> tuple[ResourceType, dict] | None:
        """The object's controller, if kubesim serves its kind and it still exists (same uid)."""
        ref = controller_ref(obj)
        if ref is None:
            return None
        rt = ref_type(ref)
        if rt is None:
            return None
        namespace = (obj["metadata"].get("namespace") or "") if rt.namespaced else ""
        found = self.store.find(rt, namespace, ref.get("name", ""))
        if found is None or found["metadata"]["uid"] != ref.get("uid"):
            return None
        return rt, found
