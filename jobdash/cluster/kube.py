"""ClusterGateway on the official `kubernetes` client: the only module that talks HTTP to a cluster."""

import functools
import json
import logging
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import convert, kinds, kube_access, pod_jobs
from .gateway import (
    JOB_ID_LABEL,
    TERM_ANNOTATION,
    Access,
    AlreadyExists,
    ClusterEvent,
    Conflict,
    Fenced,
    JobObject,
    NodeInfo,
    NotFound,
    ObjectKey,
    PodInfo,
    QueuedEntry,
    QueuedObject,
    Quota,
    Transient,
    WatchEvent,
)
from .informer import Informer
from .kube_client import answers, api_client, translate
from .kube_queue import QueueObjects

log = logging.getLogger(__name__)


def _live_job_id(item: JobObject) -> int | None:
    return None if item.job_id is None or item.deleting else item.job_id


def _job_label_index(label: str) -> Callable[[PodInfo], tuple[str, str, str] | None]:
    """Files a pod under (label, namespace, value) of one job-name label (kinds.pods_key)."""

    def index(pod: PodInfo) -> tuple[str, str, str] | None:
        value = pod.labels.get(label)
        return (label, pod.namespace, value) if value else None

    return index


class KubeGateway:
    def __init__(self, api: client.ApiClient, *, request_timeout: float = 10.0, retries: int = 3, backoff: float = 0.1):
        self._api = api
        self._core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        self._timeout = request_timeout
        self._retries = retries
        self._leading: Callable[[], bool] = lambda: True
        self._backoff = backoff
        self._on_event: Callable[[WatchEvent], None] | None = None
        self._binding_watches: list[Informer] = []
        # Finished pods stay listed until deleted: the cycle asks for the few that matter,
        # by the label each kind's controller puts on its pods (kinds.pods_key).
        pod_indexes: dict[str, Callable[[Any], Any]] = {
            f"job:{label}": _job_label_index(label) for label in kinds.job_label_keys()
        }
        pod_indexes["live"] = lambda p: None if p.terminated else True
        # Jobs whose object is their pods (pod_jobs.py): their live pods by job id.
        self._pod_kinds = {kinds.adapter(key).pod_job_label: key for key in kinds.keys() if kinds.objects_are_pods(key)}
        pod_indexes["pod-job"] = self._pod_job_id
        self._informers = {
            "quota": Informer("quota", self._core.list_resource_quota_for_all_namespaces, convert.quota, self._changed),
            "node": Informer("node", self._core.list_node, convert.node, self._changed),
            "pod": Informer(
                "pod", self._core.list_pod_for_all_namespaces, convert.pod, self._changed, indexes=pod_indexes
            ),
        }
        # One watch cache per kind ("tfjobs.kubeflow.org"); finished objects stay, found by job id.
        self._jobs = {
            key: Informer(
                key,
                self._lister(key),
                functools.partial(convert.job_object, key),
                self._changed,
                indexes={"job": _live_job_id},
                journal=("job",),
            )
            for key in kinds.object_keys()
        }
        self._informers.update(self._jobs)
        # The waiting jobs' QueuedJobs: jobdash's own creates and updates wake nobody; a
        # deletion (someone leaving the queue with kubectl delete) wakes the leader.
        self._queue = QueueObjects(self._custom, self._call, self._write, self._send)
        self._informers["queuedjob"] = Informer(
            "queuedjob",
            self._queue.lister,
            convert.queued_object,
            lambda kind, type_, ns, name: self._changed(kind, type_, ns, name) if type_ == "DELETED" else None,
        )

    def _pod_job_id(self, pod: PodInfo) -> int | None:
        if pod.terminated or pod.deleting or not any(label in pod.labels for label in self._pod_kinds):
            return None
        return pod_jobs.job_id_of(pod)

    def _pod_job_key(self, pod: PodInfo) -> ObjectKey:
        label = next(label for label in self._pod_kinds if label in pod.labels)
        return (self._pod_kinds[label], pod.namespace, pod.labels[label])

    @classmethod
    def from_settings(cls, mode: str, kubeconfig: str | None = None, context: str | None = None, **options):
        return cls(api_client(mode, kubeconfig, context), **options)

    def answers(self, timeout: float = 2.0) -> bool:
        return answers(self._api, timeout)

    def _lister(self, kind_key: str) -> Callable[..., Any]:
        group, version, plural = kinds.group_version_plural(kind_key)
        return lambda **kwargs: self._custom.list_cluster_custom_object(group, version, plural, **kwargs)

    # --- watch cache ---

    def start(self, on_event: Callable[[WatchEvent], None] | None = None, timeout: float = 30.0) -> None:
        self._on_event = on_event
        for informer in self._informers.values():
            informer.start()
        deadline = time.monotonic() + timeout
        for informer in self._informers.values():
            if not informer.wait_synced(deadline - time.monotonic()):
                raise Transient(f"the {informer.kind} cache did not sync within {timeout:.0f}s")

    def stop(self) -> None:
        for informer in [*self._informers.values(), *self._binding_watches]:
            informer.stop()

    def review_access(
        self, user: str, groups: Sequence[str], verb: str, group: str, resource: str, namespace: str
    ) -> Access:
        body = kube_access.review_body(user, groups, verb, group, resource, namespace)
        return kube_access.answer(self._call(self._send, "POST", kube_access.REVIEWS, body))

    def watch_bindings(self, on_change: Callable[[], None]) -> None:
        watches = kube_access.binding_informers(self._api, on_change)
        self._binding_watches += watches
        for informer in watches:
            informer.start()

    def _changed(self, kind: str, type_: str, namespace: str, name: str) -> None:
        if self._on_event is not None:
            self._on_event(WatchEvent(kind, type_, namespace, name))

    def quotas(self) -> list[Quota]:
        return self._informers["quota"].items()

    def nodes(self) -> list[NodeInfo]:
        return self._informers["node"].items()

    def pods(self) -> list[PodInfo]:
        return self._informers["pod"].items()

    def job_objects(self) -> list[JobObject]:
        return [item for informer in self._jobs.values() for item in informer.items()]

    def live_job_ids(self) -> set[int]:
        """The jobdash jobs that have an object in the cluster not being deleted."""
        found = set().union(*(informer.index_values("job") for informer in self._jobs.values()))
        return found | self._informers["pod"].index_values("pod-job")

    def changed_job_ids(self) -> set[int] | None:
        """The jobs whose live object appeared or changed since the last call (one consumer:
        the tracker's sweep for objects of cancelled jobs); None: too many to have kept."""
        found: set[int] = set()
        overflowed = False
        for informer in self._jobs.values():  # (every journal drained, whatever the others say)
            changed = informer.drain_changed("job")
            if changed is None:
                overflowed = True
            else:
                found |= changed
        return None if overflowed else found

    def job_objects_of(self, job_ids: Iterable[int]) -> dict[int, JobObject]:
        """The live object of each of these jobs that has one (of two carrying the same job
        id, one of them)."""
        wanted = list(job_ids)
        found: dict[int, JobObject] = {}
        for informer in self._jobs.values():
            for job_id, items in informer.indexed("job", wanted).items():
                if items:
                    found.setdefault(job_id, items[0])
        for job_id, pods in self._informers["pod"].indexed("pod-job", wanted).items():
            made = pod_jobs.group_object(self._pod_job_key(pods[0]), pods, job_id) if pods else None
            if made is not None:
                found.setdefault(job_id, made)
        return found

    def live_pods(self) -> list[PodInfo]:
        """Pods not terminated (not Succeeded or Failed)."""
        return self._informers["pod"].indexed("live", [True])[True]

    def pods_of_jobs(self, keys) -> dict[ObjectKey, list[PodInfo]]:
        """The pods of each job, found by the label its kind's controller sets on them."""
        wanted: dict[str, dict[tuple[str, str, str], ObjectKey]] = {}
        for key in keys:
            filed = kinds.pods_key(key)
            wanted.setdefault(filed[0], {})[filed] = key
        found: dict[ObjectKey, list[PodInfo]] = {}
        for label, by_filed in wanted.items():
            for filed, pods in self._informers["pod"].indexed(f"job:{label}", by_filed).items():
                found[by_filed[filed]] = pods
        return found

    def job_object(self, key: ObjectKey) -> JobObject | None:
        informer = self._jobs.get(key[0])
        if informer is None:  # a job of pods: made from them
            return pod_jobs.group_object(key, self.pods_of_jobs([key]).get(key, ()))
        return informer.get(key[1], key[2])

    @property
    def informers(self) -> Mapping[str, Informer]:
        return self._informers

    def revision(self, *, mirror: bool = False) -> int:
        """A number that changes whenever what the cache holds of quotas, nodes, pods and job
        objects changes (with `mirror`: of the QueuedJob objects alone)."""
        if mirror:
            return self._informers["queuedjob"].revision
        return sum(informer.revision for kind, informer in self._informers.items() if kind != "queuedjob")

    def queued_objects(self) -> list[QueuedObject] | None:
        informer = self._informers["queuedjob"]
        return informer.items() if informer.served and informer.synced.is_set() else None

    # --- writes ---

    def create_queued(self, entry: QueuedEntry, term: int | None = None) -> QueuedObject:
        return self._queue.create(entry, term)

    def update_queued(self, namespace: str, name: str, status: Mapping[str, Any], term: int | None = None) -> None:
        self._queue.update(namespace, name, status, term)

    def delete_queued(self, namespace: str, name: str, resource_version: str, term: int | None = None) -> None:
        self._queue.delete(namespace, name, resource_version, term)

    def queued_gone(self, namespace: str, name: str) -> bool:
        return self._queue.gone(namespace, name)

    def record_event(self, event: ClusterEvent) -> None:
        self._queue.record_event(event, socket.gethostname())

    def writes_while(self, leading: Callable[[], bool]) -> None:
        """From now on every write first asks `leading` (this process's leadership, by its own
        clock): a process woken from a pause past its lease writes nothing more, whether or
        not a webhook would refuse it; only a request already on its way when it paused can
        reach the API server."""
        self._leading = leading

    def _write(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        return self._call(fn, *args, _write=True, **kwargs)

    def _call(self, fn: Callable[..., Any], *args, _write: bool = False, **kwargs) -> Any:
        """One API call; transient failures are retried with exponential backoff."""
        delay = self._backoff
        for attempt in range(self._retries + 1):
            if _write and not self._leading():
                raise Fenced("this process's leadership lapsed by its own clock: it writes nothing more")
            try:
                return fn(*args, _request_timeout=self._timeout, **kwargs)
            except ApiException as error:
                failure = translate(error)
            except (urllib3.exceptions.HTTPError, OSError) as error:
                failure = Transient(f"{error.__class__.__name__}: {error}")
            if not isinstance(failure, Transient) or attempt == self._retries:
                raise failure
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def read_job_object(self, key: ObjectKey) -> JobObject:
        """Straight from the API server, not the cache (a job of pods: from the cache, as its
        pods were there before it was released)."""
        kind_key, namespace, name = key
        if kind_key not in self._jobs:
            found = self.job_object(key)
            if found is None:
                raise NotFound(f"no pods of {name} in {namespace}")
            return found
        group, version, plural = kinds.group_version_plural(kind_key)
        obj = self._call(self._custom.get_namespaced_custom_object, group, version, namespace, plural, name)
        return convert.job_object(kind_key, obj)

    def read_object(self, api_version: str, plural: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """An object a job refers to (a TrainJob's runtime); cluster-scoped when namespace is ""."""
        group, _, version = api_version.rpartition("/")
        try:
            if namespace:
                return self._call(self._custom.get_namespaced_custom_object, group, version, namespace, plural, name)
            return self._call(self._custom.get_cluster_custom_object, group, version, plural, name)
        except NotFound:
            return None

    def list_objects(self, api_version: str, plural: str) -> list[Mapping[str, Any]]:
        """Every object of a cluster-scoped type (the priority classes), straight from the API server."""
        group, _, version = api_version.rpartition("/")
        listed = self._call(self._custom.list_cluster_custom_object, group, version, plural)
        return list(listed.get("items") or [])

    def create_job_object(self, *, job_id: int, manifest: Mapping[str, Any], term: int | None = None) -> JobObject:
        """Create the object of a released job. Idempotent: an object of that kind and name
        that carries this job's id is the one we created before (a retry, or a crash after create)."""
        body = convert.release_body(job_id, manifest, term)
        kind_key = kinds.key_of(body["apiVersion"], body["kind"])
        group, version, plural = kinds.group_version_plural(kind_key)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            created = self._write(self._create_namespaced, group, version, namespace, plural, body)
            return convert.job_object(kind_key, created)
        except AlreadyExists:
            existing = self.read_job_object((kind_key, namespace, name))
            what = f"{body['kind']} {namespace}/{name}"
            if existing.deleting:
                # Our previous attempt (taken back after a start timeout), or a finished
                # job's object this job replaces, is not gone yet.
                raise Transient(f"{what} is still being deleted") from None
            if existing.job_id == job_id:
                return existing
            raise AlreadyExists(
                f"{what} already exists and was not released by jobdash job {job_id}"
                + (f" (it belongs to job {existing.job_id})" if existing.job_id else "")
            ) from None

    def _create_namespaced(
        self, group: str, version: str, namespace: str, plural: str, body: Mapping[str, Any], **options: Any
    ) -> Any:
        """CustomObjectsApi.create_namespaced_custom_object's request, without what a release
        does not need and paid on every one (a fifth of the dispatcher's CPU under load): the
        generated method's pydantic validation of its arguments and its walk over the body,
        which is plain JSON here. Same URL, headers and authentication, same errors."""
        return self._send("POST", f"/apis/{group}/{version}/namespaces/{namespace}/{plural}", body, **options)

    def _send(self, method: str, path: str, body: Mapping[str, Any], **options: Any) -> Any:
        """One request with a plain JSON body (a PATCH's is a merge patch) past the generated
        client's per-call validation, with the client's authentication and errors."""
        content = "application/merge-patch+json" if method == "PATCH" else "application/json"
        method, url, headers, _body, _post = self._api.param_serialize(
            method=method,
            resource_path=path,
            header_params={"Accept": "application/json", "Content-Type": content},
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(
            method, url, header_params=headers, body=body, _request_timeout=options.get("_request_timeout")
        )
        data = response.read()
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=data.decode("utf-8", "replace"), data=None)
        return json.loads(data)

    def _patch(self, key: ObjectKey, patch: dict[str, Any]) -> dict[str, Any]:
        kind_key, namespace, name = key
        group, version, plural = kinds.group_version_plural(kind_key)
        return self._write(
            self._custom.patch_namespaced_custom_object,
            group,
            version,
            namespace,
            plural,
            name,
            patch,
            _content_type="application/merge-patch+json",
        )

    def announce(self, key: ObjectKey, uid: str, reason: str, message: str) -> None:
        """A Kubernetes Event on the job's object (what `kubectl describe` and the job's own
        code can watch for), from jobdash."""
        kind_key, namespace, name = key
        adapter = kinds.adapter(kind_key)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": adapter.api_version,
                "kind": adapter.kind,
                "name": name,
                "namespace": namespace,
                "uid": uid,
            },
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": "jobdash"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._write(self._core.create_namespaced_event, namespace, body)

    def set_suspended(self, key: ObjectKey, suspended: bool, term: int | None = None) -> None:
        self._patch(key, {**kinds.suspend_patch(key[0], suspended), **convert.term_patch(term)})

    def update_job_object(
        self, key: ObjectKey, change: Callable[[dict[str, Any]], dict[str, Any]], term: int | None = None
    ) -> JobObject:
        """Read the object, change it, and replace it with exactly that version (a
        resourceVersion precondition): a release that holds or restores its pod templates
        and flips suspend in one write. Stamped with the term like every write of ours.
        Retried on a conflict (someone wrote between our read and write)."""
        kind_key, namespace, name = key
        group, version, plural = kinds.group_version_plural(kind_key)
        for attempt in range(4):
            current = self._call(self._custom.get_namespaced_custom_object, group, version, namespace, plural, name)
            body = change(current)
            if term is not None:
                annotations = body.setdefault("metadata", {}).setdefault("annotations", {})
                annotations[TERM_ANNOTATION] = str(term)
            try:
                replaced = self._write(
                    self._custom.replace_namespaced_custom_object, group, version, namespace, plural, name, body
                )
            except Conflict:
                if attempt == 3:
                    raise
                continue
            return convert.job_object(kind_key, replaced)
        raise AssertionError("unreachable")  # (the last attempt returns or raises)

    def ungate_pod(
        self, pod: PodInfo, gate: str, node: str | None, annotations: Mapping[str, str] | None = None
    ) -> None:
        """Send a gated pod to `node`: its nodeSelector names the node's hostname, and `gate`
        goes (the API server lets a gated pod's scheduling directives only narrow). No
        node: the gate goes, and the scheduler places the pod. `annotations`: written in the
        same patch (the shared GPU cards it is pinned to, cluster/devices.py)."""
        others = [{"name": name} for name in pod.gates if name != gate]
        spec: dict[str, Any] = {"schedulingGates": others or None}
        if node is not None:
            spec["nodeSelector"] = {convert.HOSTNAME: node}
        patch: dict[str, Any] = {"spec": spec}
        if annotations:
            patch["metadata"] = {"annotations": dict(annotations)}
        # A merge patch: its list replaces the pod's gates (a strategic merge patch would merge
        # them by name and keep ours).
        self._write(self._send, "PATCH", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}", patch)

    def delete_pod(self, namespace: str, name: str) -> None:
        try:
            self._write(self._core.delete_namespaced_pod, name, namespace)
        except NotFound:
            pass  # already gone is what we wanted

    def label_job_object(self, key: ObjectKey, job_id: int, term: int | None = None) -> None:
        """Bind an existing object (created by someone else, suspended) to a jobdash job."""
        patch: dict[str, Any] = {"metadata": {"labels": {JOB_ID_LABEL: str(job_id)}}}
        if term is not None:
            patch["metadata"]["annotations"] = {TERM_ANNOTATION: str(term)}
        self._patch(key, patch)

    def delete_job_object(self, key: ObjectKey, term: int | None = None) -> None:
        """Delete a job's object. With a term, fenced: first stamp it with the term (an update
        the webhook refuses from a deposed leader), then delete exactly that version (a
        resourceVersion precondition), so a deposed leader can neither delete directly
        nor delete an object a newer leader has touched since."""
        kind_key, namespace, name = key
        if kind_key not in self._jobs:
            made = self.job_object(key)
            for pod in pod_jobs.pods_of(key, self.pods_of_jobs([key]).get(key, ()), made.job_id) if made else ():
                self._delete_pod_fenced(pod, term)
            return
        group, version, plural = kinds.group_version_plural(kind_key)
        try:
            options: dict[str, Any] = {"propagationPolicy": "Background"}
            if term is not None:
                stamped = self._patch(key, convert.term_patch(term))
                options["preconditions"] = {"resourceVersion": stamped["metadata"]["resourceVersion"]}
            self._write(
                self._custom.delete_namespaced_custom_object, group, version, namespace, plural, name, body=options
            )
        except NotFound:
            pass  # already gone is what we wanted

    def _delete_pod_fenced(self, pod: PodInfo, term: int | None) -> None:
        """One pod of a job of pods, fenced as delete_job_object fences an object."""
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            options: dict[str, Any] = {}
            if term is not None:
                stamped = self._write(self._send, "PATCH", path, convert.term_patch(term))
                options["preconditions"] = {"resourceVersion": stamped["metadata"]["resourceVersion"]}
            self._write(self._core.delete_namespaced_pod, pod.name, pod.namespace, body=options)
        except NotFound:
            pass
