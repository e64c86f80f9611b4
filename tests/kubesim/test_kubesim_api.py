"""API conformance through the official `kubernetes` client over HTTP."""

import json

import pytest
import yaml
from kubernetes import client
from kubernetes import config as kube_config

from kubesim.testing import tfjob_manifest

G, V, P = "kubeflow.org", "v1", "tfjobs"


def status_of(exc: client.ApiException) -> dict:
    return json.loads(exc.body)


def test_kubeconfig_loads_and_identifies_users(sim):
    data = yaml.safe_load(open(sim.kubeconfig_path))
    assert data["current-context"] == "system:serviceaccount:jobdash:jobdash"
    api_client = kube_config.new_client_from_config(config_file=sim.kubeconfig_path, context="alice@example.com")
    namespaces = client.CoreV1Api(api_client).list_namespace()
    assert {"default", "team-a", "team-b"} <= {n.metadata.name for n in namespaces.items}
    api_client.close()


def test_load_kube_config_then_default_clients(sim):
    kube_config.load_kube_config(config_file=sim.kubeconfig_path)
    try:
        nodes = client.CoreV1Api().list_node(label_selector="pool=gpu")
        assert sorted(n.metadata.name for n in nodes.items) == ["gpu-node-0", "gpu-node-1"]
        assert nodes.items[0].spec.taints[0].key == "gpu"
        assert nodes.items[0].status.allocatable["nvidia.com/gpu"] == "8"
        assert client.VersionApi().get_code().major == "1"
    finally:
        client.Configuration.set_default(client.Configuration())


def test_request_without_a_known_token_is_401(sim):
    api_client = sim.api_client()
    api_client.configuration.api_key = {"BearerToken": "wrong"}
    with pytest.raises(client.ApiException) as caught:
        client.CoreV1Api(api_client).list_namespace()
    assert caught.value.status == 401
    api_client.close()


def test_tfjob_create_get_list_delete(custom, sim):
    created = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("mnist", "team-a", workers=2))
    meta = created["metadata"]
    assert meta["resourceVersion"] and meta["uid"] and meta["generation"] == 1 and meta["namespace"] == "team-a"
    got = custom.get_namespaced_custom_object(G, V, "team-a", P, "mnist")
    assert got["metadata"]["uid"] == meta["uid"]
    listed = custom.list_namespaced_custom_object(G, V, "team-a", P)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["mnist"]
    assert listed["kind"] == "TFJobList" and int(listed["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])
    everywhere = custom.list_cluster_custom_object(G, V, P)
    assert [i["metadata"]["namespace"] for i in everywhere["items"]] == ["team-a"]
    deleted = custom.delete_namespaced_custom_object(G, V, "team-a", P, "mnist")
    assert deleted["metadata"]["name"] == "mnist"
    with pytest.raises(client.ApiException) as caught:
        custom.get_namespaced_custom_object(G, V, "team-a", P, "mnist")
    assert caught.value.status == 404 and status_of(caught.value)["reason"] == "NotFound"


def test_create_twice_is_409_already_exists(custom):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("dup", "team-a"))
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("dup", "team-a"))
    body = status_of(caught.value)
    assert caught.value.status == 409 and body["reason"] == "AlreadyExists"
    assert body["message"] == 'tfjobs.kubeflow.org "dup" already exists'


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda m: m["spec"].pop("tfReplicaSpecs"), "spec.tfReplicaSpecs"),
        (lambda m: m["spec"]["tfReplicaSpecs"]["Worker"].update(replicas=-1), "spec.tfReplicaSpecs[Worker].replicas"),
        (
            lambda m: m["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(name="main"),
            "spec.tfReplicaSpecs[Worker].template.spec.containers",
        ),
        (
            lambda m: m["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"][
                "requests"
            ].update(cpu="lots"),
            "spec.tfReplicaSpecs[Worker].template.spec.containers[0].resources.requests[cpu]",
        ),
        (lambda m: m["metadata"].update(name="Bad_Name"), "metadata.name"),
    ],
)
def test_invalid_tfjob_is_422_with_the_field(custom, mutate, field):
    manifest = tfjob_manifest("bad", "team-a")
    mutate(manifest)
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "team-a", P, manifest)
    body = status_of(caught.value)
    assert caught.value.status == 422 and body["reason"] == "Invalid"
    assert field in [c["field"] for c in body["details"]["causes"]]


def test_create_in_missing_namespace_is_404(custom):
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "nowhere", P, tfjob_manifest("x", "nowhere"))
    assert caught.value.status == 404 and 'namespaces "nowhere" not found' in status_of(caught.value)["message"]


def test_stale_replace_is_409_conflict(custom):
    job = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("cas", "team-a", suspend=True))
    job["metadata"].setdefault("labels", {})["try"] = "1"
    updated = custom.replace_namespaced_custom_object(G, V, "team-a", P, "cas", job)
    assert int(updated["metadata"]["resourceVersion"]) > int(job["metadata"]["resourceVersion"])
    job["metadata"]["labels"]["try"] = "2"  # still carries the old resourceVersion
    with pytest.raises(client.ApiException) as caught:
        custom.replace_namespaced_custom_object(G, V, "team-a", P, "cas", job)
    assert caught.value.status == 409 and status_of(caught.value)["reason"] == "Conflict"
    assert custom.get_namespaced_custom_object(G, V, "team-a", P, "cas")["metadata"]["labels"]["try"] == "1"


def test_replace_of_a_custom_resource_needs_a_resource_version(custom):
    job = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("norv", "team-a", suspend=True))
    del job["metadata"]["resourceVersion"]
    with pytest.raises(client.ApiException) as caught:
        custom.replace_namespaced_custom_object(G, V, "team-a", P, "norv", job)
    assert caught.value.status == 422


def test_merge_patch_and_json_patch(custom, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("p", "team-a", suspend=True))
    merged = custom.patch_namespaced_custom_object(G, V, "team-a", P, "p", {"spec": {"runPolicy": {"suspend": False}}})
    assert merged["spec"]["runPolicy"]["suspend"] is False and merged["metadata"]["generation"] == 2
    assert merged["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 1  # merge keeps what the patch omits
    patched = custom.patch_namespaced_custom_object(
        G,
        V,
        "team-a",
        P,
        "p",
        [{"op": "add", "path": "/metadata/labels", "value": {"queue": "jobdash"}}],
        _content_type="application/json-patch+json",
    )
    assert patched["metadata"]["labels"] == {"queue": "jobdash"} and patched["metadata"]["generation"] == 2
    with pytest.raises(client.ApiException) as caught:  # a failed JSON-patch test op
        custom.patch_namespaced_custom_object(
            G,
            V,
            "team-a",
            P,
            "p",
            [{"op": "test", "path": "/metadata/labels/queue", "value": "other"}],
            _content_type="application/json-patch+json",
        )
    assert caught.value.status == 422


def test_a_list_body_sent_as_merge_patch_is_refused(custom):
    # CustomObjectsApi (client 37) sends merge-patch+json whatever the body: a JSON patch
    # needs _content_type="application/json-patch+json", or the API server refuses it.
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("lp", "team-a", suspend=True))
    with pytest.raises(client.ApiException) as caught:
        custom.patch_namespaced_custom_object(
            G, V, "team-a", P, "lp", [{"op": "add", "path": "/metadata/labels", "value": {}}]
        )
    assert caught.value.status == 400


def test_patch_with_a_stale_resource_version_is_409(custom):
    job = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("prv", "team-a", suspend=True))
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "prv", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(client.ApiException) as caught:
        custom.patch_namespaced_custom_object(
            G,
            V,
            "team-a",
            P,
            "prv",
            {"metadata": {"resourceVersion": job["metadata"]["resourceVersion"], "labels": {"a": "2"}}},
        )
    assert caught.value.status == 409


def test_status_is_a_subresource(custom):
    job = custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("st", "team-a", suspend=True))
    assert "status" not in job  # status on create is dropped
    job["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    replaced = custom.replace_namespaced_custom_object(G, V, "team-a", P, "st", job)
    assert replaced.get("status") is None  # ... and ignored by updates of the main resource
    via_status = custom.patch_namespaced_custom_object_status(G, V, "team-a", P, "st", {"status": {"note": "x"}})
    assert via_status["status"] == {"note": "x"}


def test_dry_run_create_stores_nothing(custom):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("dry", "team-a"), dry_run="All")
    assert custom.list_namespaced_custom_object(G, V, "team-a", P)["items"] == []


def test_selectors_and_paging_through_the_client(custom, sim):
    for i in range(7):
        custom.create_namespaced_custom_object(
            G,
            V,
            "team-b",
            P,
            tfjob_manifest(f"job-{i}", "team-b", suspend=True, labels={"parity": "even" if i % 2 == 0 else "odd"}),
        )
    even = custom.list_namespaced_custom_object(G, V, "team-b", P, label_selector="parity=even")
    assert [i["metadata"]["name"] for i in even["items"]] == ["job-0", "job-2", "job-4", "job-6"]
    one = custom.list_namespaced_custom_object(G, V, "team-b", P, field_selector="metadata.name=job-3")
    assert [i["metadata"]["name"] for i in one["items"]] == ["job-3"]
    names, token, pages = [], None, 0
    while True:
        page = custom.list_namespaced_custom_object(G, V, "team-b", P, limit=3, _continue=token)
        names += [i["metadata"]["name"] for i in page["items"]]
        pages += 1
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == [f"job-{i}" for i in range(7)] and pages == 3
    with pytest.raises(client.ApiException) as caught:
        custom.list_namespaced_custom_object(G, V, "team-b", P, field_selector="spec.foo=bar")
    assert caught.value.status == 400


def test_continue_token_too_old_is_410(custom, sim):
    for i in range(3):
        custom.create_namespaced_custom_object(G, V, "team-b", P, tfjob_manifest(f"old-{i}", "team-b", suspend=True))
    token = custom.list_namespaced_custom_object(G, V, "team-b", P, limit=1)["metadata"]["continue"]
    sim.model.compact()
    custom.create_namespaced_custom_object(G, V, "team-b", P, tfjob_manifest("newer", "team-b", suspend=True))
    sim.model.compact()
    with pytest.raises(client.ApiException) as caught:
        custom.list_namespaced_custom_object(G, V, "team-b", P, limit=1, _continue=token)
    assert caught.value.status == 410 and status_of(caught.value)["reason"] == "Expired"


def test_deleting_a_tfjob_deletes_its_pods(custom, core, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("gc", "team-a", workers=3))
    sim.settle()
    assert len(core.list_namespaced_pod("team-a", label_selector="training.kubeflow.org/job-name=gc").items) == 3
    custom.delete_namespaced_custom_object(G, V, "team-a", P, "gc")
    assert core.list_namespaced_pod("team-a").items == []


def test_leases_with_optimistic_concurrency(sim):
    api_client = sim.api_client("system:serviceaccount:jobdash:jobdash")
    leases = client.CoordinationV1Api(api_client)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="jobdash-leader"),
        spec=client.V1LeaseSpec(holder_identity="beat-0", lease_duration_seconds=15),
    )
    created = leases.create_namespaced_lease("default", body)
    created.spec.holder_identity = "beat-1"
    taken = leases.replace_namespaced_lease("jobdash-leader", "default", created)
    assert taken.spec.holder_identity == "beat-1"
    created.spec.holder_identity = "beat-2"  # stale resourceVersion: the other replica lost the race
    with pytest.raises(client.ApiException) as caught:
        leases.replace_namespaced_lease("jobdash-leader", "default", created)
    assert caught.value.status == 409
    patched = leases.patch_namespaced_lease("jobdash-leader", "default", {"spec": {"leaseTransitions": 1}})
    assert patched.spec.lease_transitions == 1 and patched.spec.holder_identity == "beat-1"
    assert [lease.metadata.name for lease in leases.list_namespaced_lease("default").items] == ["jobdash-leader"]
    leases.delete_namespaced_lease("jobdash-leader", "default")
    assert leases.list_namespaced_lease("default").items == []  # kube-node-lease keeps the nodes' own
    api_client.close()


def test_webhook_configurations_crud_and_validation(sim):
    api_client = sim.api_client()
    admission = client.AdmissionregistrationV1Api(api_client)
    hook = {
        "name": "tfjobs.jobdash.example.com",
        "clientConfig": {"url": "http://127.0.0.1:1/hook"},
        "rules": [
            {"operations": ["CREATE"], "apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "resources": ["tfjobs"]}
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    created = admission.create_mutating_webhook_configuration(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "jobdash"},
            "webhooks": [hook],
        }
    )
    assert created.webhooks[0].failure_policy == "Fail" and created.webhooks[0].timeout_seconds == 10
    assert [c.metadata.name for c in admission.list_mutating_webhook_configuration().items] == ["jobdash"]
    with pytest.raises(client.ApiException) as caught:
        admission.create_validating_webhook_configuration(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "bad"},
                "webhooks": [{**hook, "sideEffects": "Unknown"}],
            }
        )
    assert caught.value.status == 422
    admission.delete_mutating_webhook_configuration("jobdash")
    assert admission.list_mutating_webhook_configuration().items == []
    api_client.close()


def test_resource_quota_and_node_reads(core):
    quota = core.read_namespaced_resource_quota("quota", "team-a")
    assert quota.status.hard["requests.cpu"] == "12" and quota.status.used["requests.cpu"] == "0"
    assert [q.metadata.namespace for q in core.list_resource_quota_for_all_namespaces().items] == ["team-a"]
    node = core.read_node("cpu-node-0")
    assert node.status.capacity["cpu"] == "8"
    assert [c.type for c in node.status.conditions] == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]


def test_unknown_resources_are_404(custom):
    with pytest.raises(client.ApiException) as caught:
        custom.list_namespaced_custom_object(G, V, "team-a", "notebooks")
    assert caught.value.status == 404
