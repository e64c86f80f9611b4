"""deploy/base's ClusterRole for jobdash covers every call jobdash's gateway makes: each one,
for every managed kind, against kubesim with RBAC on and that ClusterRole (bound by deploy's
ClusterRoleBinding, read from deploy/base/rbac.yaml as `make run` reads it) as jobdash's only
right. A gateway method added without its permission fails here, and the list below must
name every method that talks to the cluster."""

import copy
import inspect

import pytest
from kubernetes import client

from jobdash.cluster import kinds
from jobdash.cluster.gateway import ClusterEvent, QueuedEntry
from jobdash.cluster.kube import KubeGateway, api_client
from jobdash.embedded.rbac import deploy_objects
from kubesim.resources import PODS, ROLEBINDINGS
from kubesim.testing import running_kubesim, training_runtime_manifest
from queueing.capabilities import objects_are_pods
from tests.waiting import eventually

from .dispatch_support import JOBDASH
from .test_dispatch_kinds import KINDS

GATE = "jobdash.io/placement"
RBAC_BINDINGS = ROLEBINDINGS


def alice_edits_team_a() -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "alice-edit", "namespace": "team-a"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
    }


# Methods served from the watch cache (or that only start and stop it): no request of theirs
# needs a permission beyond the list and watch that start() makes.
CACHE_ONLY = {
    "start",
    "stop",
    "from_settings",
    "writes_while",
    "quotas",
    "nodes",
    "pods",
    "live_pods",
    "pods_of_jobs",
    "job_objects",
    "job_object",
    "job_objects_of",
    "revision",
    "live_job_ids",
    "changed_job_ids",
    "queued_objects",
}
CALLED = {
    "read_job_object",
    "read_object",
    "list_objects",
    "create_job_object",
    "label_job_object",
    "set_suspended",
    "update_job_object",
    "announce",
    "delete_job_object",
    "ungate_pod",
    "delete_pod",
    "create_queued",
    "update_queued",
    "queued_gone",
    "record_event",
    "delete_queued",
    "review_access",
    "watch_bindings",
    "answers",
}


@pytest.fixture
def sim():
    config = {
        "rbac": True,
        "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "40"}}],
        "users": [
            {"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]},
            {"token": "admin-token", "username": "kubernetes-admin", "groups": ["system:masters"]},
        ],
        "objects": [
            training_runtime_manifest("torch-distributed", cpu="1", memory="1Gi"),
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 10},
            *deploy_objects(),
        ],
    }
    with running_kubesim(config, manual_clock=True) as running:
        yield running


def test_every_gateway_call_is_covered_by_this_test():
    public = {name for name, _ in inspect.getmembers(KubeGateway, callable) if not name.startswith("_")}
    assert public == CACHE_ONLY | CALLED, sorted(public ^ (CACHE_ONLY | CALLED))


def test_deploys_cluster_role_allows_every_gateway_call(sim):
    gateway = KubeGateway(api_client("kubeconfig", sim.kubeconfig_path), retries=1, backoff=0.01)
    gateway.start(timeout=10)  # lists and watches quotas, nodes, pods and every kind, cluster-wide
    try:
        assert gateway.quotas() and gateway.nodes()
        assert gateway.answers()  # GET /version: every authenticated identity may (system:discovery)
        runtime = gateway.read_object(
            "trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", "", "torch-distributed"
        )
        assert runtime is not None
        assert [p["metadata"]["name"] for p in gateway.list_objects("scheduling.k8s.io/v1", "priorityclasses")]
        for job_id, (kind, build) in enumerate(sorted(KINDS.items()), start=1):
            manifest = build(f"rbac-{kind.lower()}")
            created = gateway.create_job_object(job_id=job_id, manifest=copy.deepcopy(manifest), term=1)
            key = created.key
            eventually(lambda key=key: gateway.job_object(key) is not None, 10, f"{kind} never reached the watch")
            assert gateway.read_job_object(key).job_id == job_id
            gateway.label_job_object(key, job_id, term=1)
            gateway.set_suspended(key, True, term=1)
            gateway.update_job_object(key, lambda obj: obj, term=1)
            gateway.announce(key, created.uid, "Preempting", "jobdash needs the room")
            gateway.delete_job_object(key, term=1)
        # every kind whose object jobdash writes went through every write above (a job of
        # plain pods is its user's pods: jobdash only ungates and deletes them, below)
        written = [key for key in kinds.keys() if not objects_are_pods(kinds.adapter(key))]
        assert len(KINDS) == len(written)

        gated = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "gated", "namespace": "team-a"},
            "spec": {
                "schedulingGates": [{"name": GATE}],
                "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
            },
        }
        sim.cluster.api.create(PODS, "team-a", gated)
        eventually(lambda: any(p.name == "gated" for p in gateway.pods()), 10, "the pod never reached the watch")
        pod = next(p for p in gateway.pods() if p.name == "gated")
        gateway.ungate_pod(pod, GATE, gateway.nodes()[0].name)
        assert not sim.cluster.store.get(PODS, "team-a", "gated")["spec"].get("schedulingGates")
        gateway.delete_pod("team-a", "gated")

        # the queue as QueuedJob objects, and the Events that tell a job's story
        entry = QueuedEntry(99, "team-a", "qj-rbac", "kubeflow.org/v1", "TFJob", "qj-rbac", {"state": "Queued"})
        made = gateway.create_queued(entry, term=1)
        gateway.update_queued("team-a", "qj-rbac", {"state": "Queued", "position": 2}, term=1)
        assert not gateway.queued_gone("team-a", "qj-rbac")
        involved = {"apiVersion": "jobdash.io/v1alpha1", "kind": "QueuedJob", "name": "qj-rbac", "namespace": "team-a"}
        gateway.record_event(
            ClusterEvent("team-a", "qj-rbac.1", involved, "Queued", "waits", "Normal", "2026-11-27T07:00:00Z")
        )

        def updated():
            return next((o for o in gateway.queued_objects() or () if o.status.get("position") == 2), None)

        eventually(lambda: updated() is not None, 10, "the QueuedJob's update never reached the watch")
        assert made.name == "qj-rbac"
        gateway.delete_queued("team-a", "qj-rbac", updated().resource_version, term=1)
        assert gateway.queued_gone("team-a", "qj-rbac")

        # roles (jobdash/jobs/roles.py): a SubjectAccessReview for a user, the bindings' watch
        changes = []
        gateway.watch_bindings(lambda: changes.append(1))
        eventually(lambda: len(changes) == 2, 10, "the bindings were never listed")  # each list counts
        denied = gateway.review_access("alice", [], "create", "batch", "jobs", "team-a")
        assert not denied.allowed
        allowed = gateway.review_access("root", ["system:masters"], "create", "batch", "jobs", "team-a")
        assert allowed.allowed
        seen = len(changes)
        sim.cluster.api.create(RBAC_BINDINGS, "team-a", alice_edits_team_a())
        eventually(lambda: len(changes) > seen, 10, "the RoleBinding never reached the watch")
        assert gateway.review_access("alice", [], "create", "batch", "jobs", "team-a").allowed
    finally:
        gateway.stop()

    # RBAC is really on (a refused call raises, above too): what deploy's role does not
    # grant is refused to the same identity
    core = client.CoreV1Api(api_client("kubeconfig", sim.kubeconfig_path))
    for forbidden in (
        lambda: core.list_namespace(),
        lambda: core.delete_namespaced_resource_quota("quota", "team-a"),
    ):
        with pytest.raises(client.ApiException) as refused:
            forbidden()
        assert refused.value.status == 403, refused.value.body
