"""The deployment files, checked statically (no Docker engine or cluster here):

- docker-compose.yml against the Compose Specification's JSON schema (the copy
  check-jsonschema vendors), plus the platform's own rules;
- deploy/ (kustomize) with kubernetes-validate, strict, against the oldest and newest
  Kubernetes versions we claim, built with `kubectl kustomize` when kubectl is present;
  cert-manager's kinds (no schema offline) by their required fields;
- the Dockerfile with hadolint, the entrypoint with shellcheck, plus the image rules;
- every environment variable they set is documented in docs/operations.md.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
K8S_VERSIONS = ("1.28.0", "1.37.0")  # matchConditions needs 1.28 (GA in 1.30)
CERT_MANAGER = "cert-manager.io/v1"


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
    assert set(services) == {"postgres", "redis", "consul", "kubesim", "migrate", "web", "webhook-ca", "worker", "beat"}
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")
    assert services["consul"]["image"].startswith("hashicorp/consul:")
    assert services["beat"]["deploy"]["replicas"] == 2
    assert [services[s]["command"] for s in ("web", "worker", "beat", "kubesim")] == [
        ["web"],
        ["worker"],
        ["beat"],
        ["kubesim"],
    ]
    # migrations before the web starts, and the webhook's CA registered once the web is up
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "migrate --noinput" in " ".join(services["migrate"]["command"])
    assert services["webhook-ca"]["depends_on"] == {
        "web": {"condition": "service_healthy"},
        "kubesim": {"condition": "service_healthy"},
    }
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
    (webhook,) = find(documents(ROOT / "deploy/base/webhook.yaml"), "MutatingWebhookConfiguration")["webhooks"]
    service = webhook["clientConfig"]["service"]
    assert kubesim["services"] == {f"{service['namespace']}/{service['name']}": "https://web:8443"}


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


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with kustomize) is not installed")
@pytest.mark.parametrize("overlay", ["deploy/base", "deploy/overlays/suspend"])
def test_kustomize_builds_and_the_result_is_valid(overlay):
    result = run("kubectl", "kustomize", overlay)
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.safe_load_all(result.stdout) if d]
    for resource in built:
        if resource["apiVersion"] != CERT_MANAGER:
            kubernetes_validate.validate(resource, K8S_VERSIONS[-1], strict=True)
        if resource["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"):
            assert resource["metadata"]["namespace"] == "jobdash"
    config = find(built, "ConfigMap", "jobdash")["data"]
    modes = (config["JOBDASH_WEBHOOK_MODE"], config["JOBDASH_RELEASE_MODE"])
    assert modes == (("suspend", "unsuspend") if overlay.endswith("suspend") else ("deny", "create"))
    images = {
        c["image"]
        for d in built
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"] + d["spec"]["template"]["spec"].get("initContainers", [])
    }
    assert len(images) == 1 and images != {"jobdash"}


def test_rbac_is_least_privilege():
    resources = base_resources()
    role = find(resources, "ClusterRole", "jobdash")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): sorted(r["verbs"]) for r in role["rules"]}
    assert rules == {
        (("kubeflow.org",), ("tfjobs",)): sorted(["create", "get", "list", "watch", "patch", "delete"]),
        (("",), ("resourcequotas", "nodes", "pods")): ["get", "list", "watch"],
        # only to create a TFJob whose ownerReference blocks the Trial's deletion
        (("kubeflow.org",), ("trials/finalizers",)): ["update"],
    }
    binding = find(resources, "ClusterRoleBinding", "jobdash")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "jobdash", "namespace": "jobdash"}]
    assert not [r for r in resources if r["kind"] in ("Role", "RoleBinding")]
    # only the worker carries a token
    mounts = {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]["automountServiceAccountToken"]
        for d in resources
        if d["kind"] == "Deployment"
    }
    assert mounts == {"jobdash-web": False, "jobdash-worker": True, "jobdash-beat": False}
    assert find(resources, "ServiceAccount", "jobdash")["automountServiceAccountToken"] is False


def test_webhook_configuration():
    from django.urls import reverse

    resources = base_resources()
    configuration = find(resources, "MutatingWebhookConfiguration")
    (hook,) = configuration["webhooks"]
    assert (hook["failurePolicy"], hook["timeoutSeconds"], hook["sideEffects"]) == ("Fail", 5, "NoneOnDryRun")
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["rules"] == [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["kubeflow.org"],
            "apiVersions": ["v1"],
            "resources": ["tfjobs"],
            "scope": "Namespaced",
        }
    ]
    (excluded,) = [
        e for e in hook["namespaceSelector"]["matchExpressions"] if e["key"] == "kubernetes.io/metadata.name"
    ]
    assert excluded["operator"] == "NotIn"
    assert {"kube-system", "kube-public", "kube-node-lease", "jobdash"} <= set(excluded["values"])
    service = hook["clientConfig"]["service"]
    assert service["path"] == reverse("admission-tfjobs")
    svc = find(resources, "Service", service["name"])
    assert svc["metadata"]["namespace"] == service["namespace"] and svc["spec"]["ports"][0]["port"] == service["port"]
    # cert-manager injects the CA of the certificate the web serves
    certificate = find(resources, "Certificate", None)
    namespace, name = configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
    assert (namespace, name) == (certificate["metadata"]["namespace"], certificate["metadata"]["name"])
    assert f"{service['name']}.{service['namespace']}.svc" in certificate["spec"]["dnsNames"]
    web = find(resources, "Deployment", "jobdash-web")["spec"]["template"]["spec"]
    (secret,) = [v["secret"]["secretName"] for v in web["volumes"] if "secret" in v]
    assert secret == certificate["spec"]["secretName"]
    # jobdash's own identity, in the configuration and in the matchCondition, agree
    own = find(resources, "ConfigMap", "jobdash")["data"]["JOBDASH_OWN_IDENTITIES"]
    (condition,) = hook["matchConditions"]
    assert condition["expression"] == f"request.operation == 'CREATE' || request.userInfo.username == '{own}'"


def test_cert_manager_resources():
    resources = base_resources()
    issuer = find(resources, "Issuer", None)
    certificate = find(resources, "Certificate", None)
    assert issuer["apiVersion"] == certificate["apiVersion"] == CERT_MANAGER
    assert issuer["spec"] == {"selfSigned": {}}
    assert certificate["spec"]["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}
    assert {"secretName", "dnsNames", "issuerRef"} <= set(certificate["spec"])


def test_workloads():
    resources = base_resources()
    deployments = {d["metadata"]["name"]: d for d in resources if d["kind"] == "Deployment"}
    assert {name: d["spec"]["replicas"] for name, d in deployments.items()} == {
        "jobdash-web": 2,
        "jobdash-worker": 1,
        "jobdash-beat": 2,
    }
    args = {name: d["spec"]["template"]["spec"]["containers"][0]["args"] for name, d in deployments.items()}
    assert args == {"jobdash-web": ["web"], "jobdash-worker": ["worker"], "jobdash-beat": ["beat"]}
    web = deployments["jobdash-web"]["spec"]["template"]["spec"]
    assert [c["args"] for c in web["initContainers"]] == [["migrate"]]
    container = web["containers"][0]
    for probe in ("livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert (get["path"], get["scheme"], get["port"]) == ("/healthz", "HTTPS", "https")
        assert {"name": "Host", "value": "localhost"} in get["httpHeaders"]  # ALLOWED_HOSTS
    for deployment in deployments.values():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
        for c in pod["containers"] + pod.get("initContainers", []):
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            assert {"configMapRef": {"name": "jobdash"}} in c["envFrom"] and {"secretRef": {"name": "jobdash"}} in c[
                "envFrom"
            ]


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
        ("/webhooks/admission/tfjobs", 200),
        ("/webhooks/admission/tfjobs", 400),
        ("/api/v1/jobs/", 200),
    ]:
        logger.access(Response(code), None, {"PATH_INFO": path}, None)
    assert logged == [("/webhooks/admission/tfjobs", 400), ("/api/v1/jobs/", 200)]
