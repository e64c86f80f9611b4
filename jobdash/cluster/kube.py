"""ClusterGateway on the official `kubernetes` client: the only module that talks HTTP to a cluster."""

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from . import convert
from .gateway import (
    JOB_ID_LABEL,
    STALE_TERM_REASON,
    TERM_ANNOTATION,
    AlreadyExists,
    Conflict,
    Fatal,
    Fenced,
    GatewayError,
    NodeInfo,
    NotFound,
    PodInfo,
    Quota,
    QuotaExceeded,
    TFJobInfo,
    Transient,
    WatchEvent,
)
from .informer import Informer

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"
TRANSIENT_STATUSES = {0, 408, 429, 500, 502, 503, 504}


def api_client(mode: str, kubeconfig: str | None = None) -> client.ApiClient:
    """mode: `kubeconfig` (or `sim`: kubesim writes a kubeconfig) or `incluster`."""
    configuration = client.Configuration()
    if mode == "incluster":
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    # Watches hold connections for minutes; releases run concurrently beside them.
    configuration.connection_pool_maxsize = 32
    configuration.retries = False  # retries are ours, with backoff, in `_call`
    return client.ApiClient(configuration)


def translate(error: ApiException) -> GatewayError:
    status = error.status or 0
    try:
        body = json.loads(error.body) if error.body else {}
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") or error.reason or str(error)
    if status in TRANSIENT_STATUSES:
        return Transient(f"{status}: {message}")
    if status == 404:
        return NotFound(message)
    if status == 409:
        return AlreadyExists(message) if body.get("reason") == "AlreadyExists" else Conflict(message)
    if status == 403 and body.get("reason") == STALE_TERM_REASON:
        return Fenced(message)
    if status == 403 and "exceeded quota" in message:
        return QuotaExceeded(message)
    return Fatal(f"{status}: {message}")


class KubeGateway:
    def __init__(self, api: client.ApiClient, *, request_timeout: float = 10.0, retries: int = 3, backoff: float = 0.1):
        self._api = api
        self._core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        self._timeout = request_timeout
        self._retries = retries
        self._backoff = backoff
        self._on_event: Callable[[WatchEvent], None] | None = None
        self._informers = {
            "quota": Informer("quota", self._core.list_resource_quota_for_all_namespaces, convert.quota, self._changed),
            "node": Informer("node", self._core.list_node, convert.node, self._changed),
            "pod": Informer(
                "pod",
                self._core.list_pod_for_all_namespaces,
                convert.pod,
                self._changed,
                indexes={
                    # Finished pods stay listed until deleted: the cycle asks for the few that matter.
                    "job": lambda p: (p.namespace, p.job_name) if p.job_name else None,
                    "live": lambda p: None if p.terminated else True,
                },
            ),
            "tfjob": Informer("tfjob", self._list_tfjobs, convert.tfjob, self._changed),
        }

    @classmethod
    def from_settings(cls, mode: str, kubeconfig: str | None = None, **options) -> "KubeGateway":
        return cls(api_client(mode, kubeconfig), **options)

    def _list_tfjobs(self, **kwargs):
        return self._custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs)

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
        for informer in self._informers.values():
            informer.stop()

    def _changed(self, kind: str, type_: str, namespace: str, name: str) -> None:
        if self._on_event is not None:
            self._on_event(WatchEvent(kind, type_, namespace, name))

    def quotas(self) -> list[Quota]:
        return self._informers["quota"].items()

    def nodes(self) -> list[NodeInfo]:
        return self._informers["node"].items()

    def pods(self) -> list[PodInfo]:
        return self._informers["pod"].items()

    def tfjobs(self) -> list[TFJobInfo]:
        return self._informers["tfjob"].items()

    def tfjobs_by_key(self) -> dict[tuple[str, str], TFJobInfo]:
        return self._informers["tfjob"].snapshot()

    def live_pods(self) -> list[PodInfo]:
        """Pods not terminated (not Succeeded or Failed)."""
        return self._informers["pod"].indexed("live", [True])[True]

    def pods_of_jobs(self, jobs) -> dict[tuple[str, str], list[PodInfo]]:
        """The pods of each (namespace, TFJob name), from the operator's job-name label."""
        return self._informers["pod"].indexed("job", jobs)

    def tfjob(self, namespace: str, name: str) -> TFJobInfo | None:
        return self._informers["tfjob"].get(namespace, name)

    @property
    def informers(self) -> Mapping[str, Informer]:
        return self._informers

    # --- writes ---

    def _call(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """One API call; transient failures are retried with exponential backoff."""
        delay = self._backoff
        for attempt in range(self._retries + 1):
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

    def read_tfjob(self, namespace: str, name: str) -> TFJobInfo:
        """Straight from the API server, not the cache."""
        return convert.tfjob(
            self._call(self._custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name)
        )

    def create_tfjob(self, *, job_id: int, manifest: Mapping[str, Any], term: int | None = None) -> TFJobInfo:
        """Create the TFJob of a released job. Idempotent: a TFJob of that name that
        carries this job's id is the one we created before (a retry, or a crash after create)."""
        body = convert.release_body(job_id, manifest, term)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            created = self._call(self._custom.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, body)
            return convert.tfjob(created)
        except AlreadyExists:
            existing = self.read_tfjob(namespace, name)
            if existing.job_id == job_id and existing.deleting:
                # Our previous attempt, taken back after a start timeout, is not gone yet.
                raise Transient(f"TFJob {namespace}/{name} from an earlier attempt is still being deleted") from None
            if existing.job_id == job_id:
                return existing
            raise AlreadyExists(
                f"TFJob {namespace}/{name} already exists and was not released by jobdash job {job_id}"
                + (f" (it belongs to job {existing.job_id})" if existing.job_id else "")
            ) from None

    def _patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._call(
            self._custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            patch,
            _content_type="application/merge-patch+json",
        )

    def set_suspended(self, namespace: str, name: str, suspended: bool, term: int | None = None) -> None:
        patch = {"spec": {"runPolicy": {"suspend": suspended}}, **convert.term_patch(term)}
        self._patch(namespace, name, patch)

    def label_tfjob(self, namespace: str, name: str, job_id: int, term: int | None = None) -> None:
        """Bind an existing TFJob (created by someone else, suspended) to a jobdash job."""
        patch: dict[str, Any] = {"metadata": {"labels": {JOB_ID_LABEL: str(job_id)}}}
        if term is not None:
            patch["metadata"]["annotations"] = {TERM_ANNOTATION: str(term)}
        self._patch(namespace, name, patch)

    def delete_tfjob(self, namespace: str, name: str, term: int | None = None) -> None:
        """Delete a TFJob. With a term, fenced: first stamp it with the term (an update the
        webhook refuses from a deposed leader), then delete exactly that version (a
        resourceVersion precondition), so a deposed leader can neither delete directly
        nor delete an object a newer leader has touched since."""
        try:
            options: dict[str, Any] = {"propagationPolicy": "Background"}
            if term is not None:
                stamped = self._patch(namespace, name, convert.term_patch(term))
                options["preconditions"] = {"resourceVersion": stamped["metadata"]["resourceVersion"]}
            self._call(
                self._custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name, body=options
            )
        except NotFound:
            pass  # already gone is what we wanted
