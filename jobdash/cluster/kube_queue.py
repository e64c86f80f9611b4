"""The queue as cluster objects, for kube.py: the QueuedJob mirror's writes and jobdash's
Kubernetes Events. The client's API object and kube.py's call wrappers (retries, the
leadership check before every write, errors translated) are handed in, so this module
talks to the cluster only through them."""

from collections.abc import Callable, Mapping
from typing import Any

from . import convert
from .gateway import (
    JOB_ID_LABEL,
    MANAGED_LABEL,
    QUEUED_GROUP,
    QUEUED_KIND,
    QUEUED_PLURAL,
    QUEUED_VERSION,
    TERM_ANNOTATION,
    AlreadyExists,
    ClusterEvent,
    NotFound,
    QueuedEntry,
    QueuedObject,
)

GROUP, VERSION, PLURAL, KIND = QUEUED_GROUP, QUEUED_VERSION, QUEUED_PLURAL, QUEUED_KIND
API_VERSION = f"{GROUP}/{VERSION}"
REPORTER = "jobdash"


def body(entry: QueuedEntry, term: int | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": entry.name,
        "namespace": entry.namespace,
        "labels": {JOB_ID_LABEL: str(entry.job_id), MANAGED_LABEL: "true"},
    }
    if term is not None:
        metadata["annotations"] = {TERM_ANNOTATION: str(term)}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {
            "jobId": entry.job_id,
            "apiVersion": entry.job_api_version,
            "kind": entry.job_kind,
            "name": entry.job_name,
        },
        "status": {k: v for k, v in entry.status.items() if v is not None},
    }


class QueueObjects:
    def __init__(self, custom: Any, call: Callable[..., Any], write: Callable[..., Any], send: Callable[..., Any]):
        """`custom`: the client's CustomObjectsApi; `call`, `write`: kube.py's read and write
        wrappers; `send`: its plain-JSON request (POST, or PATCH as a merge patch)."""
        self._custom = custom
        self._call, self._write, self._send = call, write, send

    def lister(self, **kwargs: Any) -> Any:
        return self._custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs)

    def _path(self, namespace: str, name: str = "") -> str:
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
        return f"{path}/{name}" if name else path

    def create(self, entry: QueuedEntry, term: int | None) -> QueuedObject:
        """Idempotent: an object of that name carrying this job's id is the one made before
        (a retry, or a crash after the create); of another job's, AlreadyExists."""
        try:
            created = self._write(self._send, "POST", self._path(entry.namespace), body(entry, term))
            return convert.queued_object(created)
        except AlreadyExists:
            existing = convert.queued_object(
                self._call(
                    self._custom.get_namespaced_custom_object, GROUP, VERSION, entry.namespace, PLURAL, entry.name
                )
            )
            if existing.job_id == entry.job_id and not existing.deleting:
                return existing
            raise

    def update(self, namespace: str, name: str, status: Mapping[str, Any], term: int | None) -> None:
        # A merge patch: a field now None (no start range yet) is removed.
        patch = {"status": dict(status), **convert.term_patch(term)}
        self._write(self._send, "PATCH", self._path(namespace, name), patch)

    def delete(self, namespace: str, name: str, resource_version: str, term: int | None) -> None:
        """Only that version: an object changed since (a newer leader's write) stays."""
        options: dict[str, Any] = {"preconditions": {"resourceVersion": resource_version}} if resource_version else {}
        try:
            self._write(
                self._custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name, body=options
            )
        except NotFound:
            pass  # already gone is what we wanted

    def gone(self, namespace: str, name: str) -> bool:
        try:
            self._call(self._custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name)
        except NotFound:
            return True
        return False

    def record_event(self, event: ClusterEvent, instance: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event.name, "namespace": event.namespace},
            "involvedObject": dict(event.involved),
            "reason": event.reason,
            "message": event.message,
            "type": event.type,
            "source": {"component": REPORTER},
            "reportingComponent": REPORTER,
            "reportingInstance": instance,
            "firstTimestamp": event.at,
            "lastTimestamp": event.at,
            "count": 1,
        }
        try:
            self._write(self._send, "POST", f"/api/v1/namespaces/{event.namespace}/events", body)
        except AlreadyExists:
            pass  # sent before (a leader that stopped before it deleted its outbox row)
