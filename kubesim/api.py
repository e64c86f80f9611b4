"""The API server's request semantics, independent of HTTP.

create/get/list/replace/patch/delete/watch for every served resource (watch's stream is
watch.py's), in the order kube-apiserver applies them: decode and default, validate
(422), mutating then validating admission webhooks, ResourceQuota admission (403),
storage (409/404/410).
Controllers use the same ``create`` with ``internal=True`` (no webhooks, quota still
applies: the training-operator's pod creations are refused exactly like anyone's).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from .admission import Admission, UserInfo
from .errors import ApiError, already_exists, bad_request, conflict, invalid, not_found
from .jsoncodec import clone
from .model import Store, new_uid, owned_by
from .patch import apply_patch
from .quota import QuotaTracker
from .resources import (
    ALL,
    BY_API_VERSION_KIND,
    EVENTS,
    LEASES,
    NAMESPACES,
    PODS,
    WORKLOADS,
    ResourceType,
    validate_name,
)
from .selectors import parse_field_selector, parse_label_selector
from .watch import watch_stream

SYSTEM = UserInfo("system:kube-controller-manager", ("system:authenticated",))
# Texts for the reply's Warning headers. (An alias because ``Api.list`` hides the builtin inside the class.)
Warnings = list[str]
_SERVER_SET = ("uid", "creationTimestamp", "generation", "deletionTimestamp")
# utilrand.String's alphabet: the API server's generateName suffixes (no vowels, no 0/1/3).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _spec_part(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


_KIND_ORDER = {rt.plural: number for number, rt in enumerate(ALL)}  # (the order deletes cascade in)
_BY_PLURAL = {rt.plural: rt for rt in ALL}


class Api:
    def __init__(self, store: Store, quota: QuotaTracker, admission: Admission, audit: list):
        self.store, self.quota, self.admission, self.audit = store, quota, admission, audit
        self.clock = store.clock

    # --- helpers -------------------------------------------------------------------------

    def _check_body(self, rt: ResourceType, namespace: str, body: object) -> dict:
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if not kind or not api_version:
            # Built-in types take the endpoint's kind; custom resources are decoded
            # as unstructured objects, which must name their kind.
            if not rt.unconditional_update:  # i.e. a custom resource
                raise bad_request(f"Object 'Kind' is missing in '{json.dumps(body)[:200]}'")
            api_version, kind = api_version or rt.api_version, kind or rt.kind
        if api_version != rt.api_version or kind != rt.kind:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({rt.api_version}) or kind {kind!r} is not {rt.kind!r}"
            )
        obj = clone(body)
        obj["apiVersion"], obj["kind"] = api_version, kind
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return obj

    def _validate(self, rt: ResourceType, obj: dict) -> None:
        if rt.default is not None:
            rt.default(obj)
        causes = validate_name(rt, obj["metadata"].get("name"))
        if rt.validate is not None and not causes:
            causes = rt.validate(obj)
        if causes:
            raise invalid(rt.group, rt.kind, obj["metadata"].get("name") or "", causes)

    def _validate_change(self, rt: ResourceType, old: dict | None, new: dict) -> None:
        """Rules on an update (immutable fields) and on other objects (a TrainJob's runtime)."""
        causes: list[dict] = []
        if old is not None and rt.validate_update is not None:
            causes = rt.validate_update(old, new)
        if rt.validate_refs is not None and not causes:
            causes = rt.validate_refs(self.store, old, new)
        if causes:
            raise invalid(rt.group, rt.kind, new["metadata"].get("name") or "", causes)

    def _require_namespace(self, rt: ResourceType, namespace: str) -> None:
        if rt.namespaced and self.store.find(NAMESPACES, "", namespace) is None:
            raise not_found("", "namespaces", namespace)

    def _record(self, rt: ResourceType, user: UserInfo, obj: dict, outcome: str, code: int, dry_run: bool) -> None:
        if rt in WORKLOADS:
            self.audit.append(
                {
                    "time": self.clock.now(),
                    "kind": rt.kind,
                    "apiVersion": rt.api_version,
                    "user": user.username,
                    "groups": list(user.groups),
                    "namespace": obj.get("metadata", {}).get("namespace", ""),
                    "name": obj.get("metadata", {}).get("name", ""),
                    "outcome": outcome,
                    "code": code,
                    "dry_run": dry_run,
                }
            )

    # --- create ------------------------------------------------------------------------

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: object,
        user: UserInfo = SYSTEM,
        dry_run: bool = False,
        internal: bool = False,
        record: bool = True,
    ) -> tuple[dict, Warnings]:
        """``internal``: no admission webhooks (kubesim's controllers and bootstrap);
        ``record``: False for the objects kubesim's controllers create (not audited)."""
        obj = self._check_body(rt, namespace, body)
        try:
            result = self._create(rt, namespace, obj, user, dry_run, internal)
        except ApiError as exc:
            if record:
                self._record(rt, user, obj, exc.reason or "Failure", exc.code, dry_run)
            raise
        if record:
            self._record(rt, user, result[0], "Created", 201, dry_run)
        return result

    def _create(self, rt, namespace, obj, user, dry_run, internal) -> tuple[dict, Warnings]:
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(_NAME_ALPHABET, k=5))
        for key in _SERVER_SET:
            meta.pop(key, None)
        # The uid exists before validation, as in the API server (a Job's selector is made from it).
        meta["uid"] = new_uid()
        if rt.status_subresource and rt.kind != "Node":
            obj.pop("status", None)  # status is written by controllers, never on create
        self._validate(rt, obj)
        self._validate_change(rt, None, obj)
        self._require_namespace(rt, namespace)
        warnings: Warnings = []
        if not internal:
            obj, warnings = self.admission.admit(
                "CREATE", rt, obj, None, user, dry_run, validate=lambda o: self._validate(rt, o)
            )
        with self.store.lock:
            self.quota.admit(rt, obj)
            if dry_run:
                name = obj["metadata"]["name"]  # obj may be a webhook-patched copy by now
                if self.store.find(rt, namespace, name) is not None:
                    raise already_exists(rt.group, rt.plural, name)
                result = clone(obj)
            else:
                result = self.store.create(rt, obj)
                if self._owner_gone(result):
                    # The garbage collector deletes dependents whose owner no longer exists.
                    self.store.delete(rt, namespace, result["metadata"]["name"])
        return result, warnings

    # --- reads -------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> dict:
        return self.store.get(rt, namespace, name)

    def _predicate(self, rt: ResourceType, label_selector: str | None, field_selector: str | None):
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.fields)
        if labels is None and fields is None:
            return None
        return lambda o: (labels is None or labels(o["metadata"].get("labels") or {})) and (fields is None or fields(o))

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> dict:
        predicate = self._predicate(rt, label_selector, field_selector)
        items, rv, token, remaining = self.store.list(rt, namespace, predicate, limit, continue_token)
        meta: dict = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
            meta["remainingItemCount"] = remaining
        return {"apiVersion": rt.api_version, "kind": f"{rt.kind}List", "metadata": meta, "items": items}

    # --- update / patch ----------------------------------------------------------------

    def replace(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: object,
        user: UserInfo = SYSTEM,
        dry_run: bool = False,
        subresource: str = "",
        internal: bool = False,
    ) -> tuple[dict, Warnings]:
        obj = self._check_body(rt, namespace, body)
        if obj["metadata"].get("name") != name:
            raise bad_request(
                f"the name of the object ({obj['metadata'].get('name')}) does not match the name on the URL ({name})"
            )
        rv = obj["metadata"].get("resourceVersion")
        if not rv and not rt.unconditional_update:
            raise invalid(
                rt.group,
                rt.kind,
                name,
                [
                    {
                        "reason": "FieldValueInvalid",
                        "field": "metadata.resourceVersion",
                        "message": "Invalid value: 0x0: must be specified for an update",
                    }
                ],
            )
        return self._update(
            rt,
            namespace,
            name,
            lambda current: obj,
            user,
            dry_run,
            subresource,
            precondition=rv or None,
            internal=internal,
        )

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        body: object,
        user: UserInfo = SYSTEM,
        dry_run: bool = False,
        subresource: str = "",
    ) -> tuple[dict, Warnings]:
        def mutate(current: dict) -> dict:
            patched = apply_patch(current, content_type, body, custom=not rt.unconditional_update)
            wanted = (patched.get("metadata") or {}).get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise conflict(rt.group, rt.plural, name)
            return patched

        return self._update(rt, namespace, name, mutate, user, dry_run, subresource, precondition=None)

    def update_with(self, rt, namespace, name, mutate, user, dry_run, subresource) -> tuple[dict, Warnings]:
        """Update by ``mutate(current) -> new`` (server-side apply), retried on a concurrent write."""
        return self._update(rt, namespace, name, mutate, user, dry_run, subresource, precondition=None)

    def _update(
        self, rt, namespace, name, mutate, user, dry_run, subresource, precondition, internal=False
    ) -> tuple[dict, Warnings]:
        # Admission webhooks run without the store lock; the write then only succeeds if
        # nothing changed meanwhile. Without a client precondition we retry like
        # GuaranteedUpdate does; with one the client gets its 409.
        for _attempt in range(10):
            current = self.store.get(rt, namespace, name)
            if precondition is not None and precondition != current["metadata"]["resourceVersion"]:
                raise conflict(rt.group, rt.plural, name)
            new = self._merge(rt, current, mutate(current), subresource)
            self._validate(rt, new)
            if not subresource:
                self._validate_change(rt, current, new)
            warnings: Warnings = []
            if not internal:
                new, warnings = self.admission.admit(
                    "UPDATE", rt, new, current, user, dry_run, subresource, validate=lambda o: self._validate(rt, o)
                )
            if dry_run:
                return new, warnings
            try:
                return self.store.update(rt, new, expected_rv=current["metadata"]["resourceVersion"]), warnings
            except ApiError as exc:
                if exc.code != 409 or precondition is not None:
                    raise
        raise conflict(rt.group, rt.plural, name)

    def _merge(self, rt: ResourceType, current: dict, new: dict, subresource: str) -> dict:
        """Apply the status-subresource split and keep server-owned metadata."""
        if subresource == "status":
            merged = clone(current)
            merged["status"] = new.get("status")
            if merged["status"] is None:
                merged.pop("status")
            return merged
        if subresource:
            raise not_found(rt.group, f"{rt.plural}/{subresource}", current["metadata"]["name"])
        new = clone(new)
        meta = new.setdefault("metadata", {})
        for key in ("name", "namespace", "uid", "creationTimestamp", "generation"):
            if key in current["metadata"]:
                meta[key] = current["metadata"][key]
        if "managedFields" not in meta and "managedFields" in current["metadata"]:
            meta["managedFields"] = current["metadata"]["managedFields"]  # omitted on an update: kept
        if rt.status_subresource:
            if "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        if _spec_part(new) != _spec_part(current):
            meta["generation"] = current["metadata"].get("generation", 1) + 1
        return new

    # --- delete ------------------------------------------------------------------------

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        options: dict | None = None,
        dry_run: bool = False,
        user: UserInfo | None = None,
    ) -> dict:
        """``user``: the caller of an API request, whose delete of a namespaced object is
        admitted (operation DELETE, ``oldObject`` the stored object, ``object`` null); None
        for kubesim's controllers and garbage collector, which delete without admission."""
        options = options or {}
        preconditions = options.get("preconditions") or {}
        if user is not None and rt.namespaced:
            # Webhooks run without the store lock, as for create and update; a denial refuses the delete.
            self.admission.admit_delete(rt, self.store.get(rt, namespace, name), user, dry_run)
        with self.store.lock:
            current = self.store.get(rt, namespace, name)
            if dry_run:
                return current
            deleted = self.store.delete(
                rt,
                namespace,
                name,
                expected_rv=preconditions.get("resourceVersion"),
                expected_uid=preconditions.get("uid"),
            )
            # Pods, events and leases own nothing here; skipping them keeps deletes O(1).
            if options.get("propagationPolicy") != "Orphan" and rt not in (PODS, EVENTS, LEASES):
                self._collect_garbage(deleted)
            if rt is NAMESPACES:
                for other in ALL:
                    if other.namespaced:
                        for obj in self.store.items(other, name):
                            self.store.delete(other, name, obj["metadata"]["name"])
        return deleted

    def _owner_gone(self, obj: dict) -> bool:
        for ref in obj["metadata"].get("ownerReferences") or []:
            owner_rt = BY_API_VERSION_KIND.get((ref.get("apiVersion"), ref.get("kind")))
            if owner_rt is None:
                continue
            owner = self.store.find(
                owner_rt, obj["metadata"].get("namespace", "") if owner_rt.namespaced else "", ref.get("name", "")
            )
            if owner is None or owner["metadata"]["uid"] != ref.get("uid"):
                return True
        return False

    def _collect_garbage(self, owner: dict) -> None:
        """Background cascading deletion, done at once: delete what the owner owned (the
        namespaced dependents, in the owner's namespace if it has one), kind by kind."""
        uid = owner["metadata"]["uid"]
        namespace = owner["metadata"].get("namespace") or None
        found = [
            (_KIND_ORDER[plural], plural, key) for plural, key in self.store.dependents(uid) if plural in _KIND_ORDER
        ]
        for _, plural, (dependent_ns, name) in sorted(found, key=lambda entry: entry[0]):
            rt = _BY_PLURAL[plural]
            if not rt.namespaced or (namespace is not None and dependent_ns != namespace):
                continue
            dependent = self.store.find(rt, dependent_ns, name)
            if dependent is not None and owned_by(dependent, uid):
                self._collect_garbage(self.store.delete(rt, dependent_ns, name))

    # --- watch -------------------------------------------------------------------------

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        resource_version: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: float | None = None,
        bookmarks: bool = False,
        bookmark_interval: float = 30.0,
        initial_events: bool = False,
    ) -> Iterator[bytes]:
        """The selectors are parsed here, as for a list; the stream itself is watch_stream's."""
        predicate = self._predicate(rt, label_selector, field_selector)
        return watch_stream(
            self.store,
            rt,
            namespace,
            resource_version,
            predicate,
            timeout_seconds,
            bookmarks,
            bookmark_interval,
            initial_events,
        )
