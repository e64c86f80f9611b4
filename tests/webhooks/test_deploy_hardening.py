"""Deployment hardening (issue #17), checked statically like test_webhook_deploy.py:

- migrations run once, as the Job jobdash-migrate, with the web's image and configuration;
  no Deployment migrates (each waits for the Job);
- worker and beat have exec liveness and readiness probes (Celery has no HTTP port); the
  beat's heartbeat probe is run against a fresh, a stale and a missing file;
- web and webhook keep a pod through drains (PodDisruptionBudget) and spread by hostname;
- a NetworkPolicy per component: what may connect to it, and where it may connect;
- the metrics ports, their Services, the optional monitoring component and the Grafana
  dashboard, whose queries name only jobdash's metric families and their labels;
- every example of examples/ fits its namespace's quota, and the nodes, in compose's kubesim.
"""

import importlib.util
import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

from jobdash.metrics import gunicorn as metrics_hooks
from tests.webhooks.test_webhook_deploy import (
    ROOT,
    base_resources,
    compose,
    find,
    kubectl,
    kustomize,
    validate,
)

COMPONENTS = ("web", "webhook", "worker", "beat")
LABEL = "app.kubernetes.io/component"

# The metric families the dashboard may use: name -> (type, labels). Names are fixed
# (jobdash/metrics/); a histogram's series are its _bucket (with le), _sum and _count.
FAMILIES = {
    "jobdash_jobs": ("gauge", {"namespace", "kind", "state", "cluster"}),
    "jobdash_queue_length": ("gauge", {"namespace", "reason"}),
    "jobdash_admission_wait_seconds": ("histogram", {"namespace", "kind"}),
    "jobdash_start_latency_seconds": ("histogram", {"namespace", "kind"}),
    "jobdash_cycle_phase_seconds": ("histogram", {"phase"}),
    "jobdash_releases_total": ("counter", {"outcome"}),
    "jobdash_preemptions_total": ("counter", {"namespace"}),
    "jobdash_leader": ("gauge", {"instance"}),
    "jobdash_leader_term": ("gauge", {"instance"}),
    "jobdash_webhook_review_seconds": ("histogram", {"kind", "allowed"}),
    "jobdash_start_estimate_error_seconds": ("histogram", {"namespace"}),
    "jobdash_start_within_late_bound_total": ("counter", {"namespace", "within"}),
}


def deployments(resources=None) -> dict[str, dict]:
    resources = base_resources() if resources is None else resources
    return {d["metadata"]["name"]: d for d in resources if d["kind"] == "Deployment"}


def pod_labels(workload: dict) -> dict[str, str]:
    return workload["spec"]["template"]["metadata"]["labels"]


def selects(selector: dict, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against labels."""
    assert set(selector) <= {"matchLabels", "matchExpressions"}, selector
    if not (selector.get("matchLabels") or {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def component(resources, name: str) -> dict:
    """The workload (Deployment or Job) of a component."""
    (found,) = [r for r in resources if r["kind"] in ("Deployment", "Job") and pod_labels(r).get(LABEL) == name]
    return found


def containers(workload: dict) -> list[dict]:
    spec = workload["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


# --- migrations ---


def test_no_deployment_migrates():
    entrypoint = (ROOT / "deploy/docker/entrypoint.sh").read_text()
    for name, deployment in deployments().items():
        for container in containers(deployment):
            words = container.get("command", []) + container.get("args", [])
            joined = " ".join(words)
            assert words[:1] != ["migrate"], f"{name}/{container['name']} migrates"
            assert "manage.py migrate" not in joined or "--check" in joined, f"{name}/{container['name']} migrates"
        # each waits for the Job instead, and that is all its init container does
        (init,) = deployment["spec"]["template"]["spec"]["initContainers"]
        assert init["args"] == ["wait-for-migrations"] and init["image"] == "jobdash", name
    # which checks, never applies: `migrate --check` until it passes
    body = re.search(r"wait_for_migrations\(\) \{\n(.*?)\n\}", entrypoint, re.S).group(1)
    assert "python manage.py migrate --check --noinput" in body and "until" in body
    assert re.sub(r"migrate --check", "", body).count("migrate") == 1  # the message's "migrations"
    assert "wait-for-migrations) wait_for_migrations ;;" in entrypoint


def test_migrations_run_as_a_job_with_the_webs_image_and_configuration():
    resources = base_resources()
    job = find(resources, "Job", "jobdash-migrate")
    spec = job["spec"]
    assert spec["backoffLimit"] >= 1 and spec["ttlSecondsAfterFinished"] > 0
    assert spec.get("activeDeadlineSeconds", 0) > 0
    pod_spec = spec["template"]["spec"]
    assert pod_spec["restartPolicy"] in ("Never", "OnFailure")
    (container,) = pod_spec["containers"]
    assert container["args"] == ["migrate"]
    assert "migrate) exec python manage.py migrate --noinput" in (ROOT / "deploy/docker/entrypoint.sh").read_text()
    web = deployments(resources)["jobdash-web"]
    (web_container,) = web["spec"]["template"]["spec"]["containers"]
    assert container["image"] == web_container["image"] == "jobdash"
    assert container["envFrom"] == web_container["envFrom"]
    # the database only: no token, and the pods' hardening
    assert pod_spec["automountServiceAccountToken"] is False
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}
    assert pod_labels(job)[LABEL] == "migrate"


@pytest.mark.skipif(kubectl() is None, reason="kubectl (with kustomize) is not installed")
def test_the_built_job_runs_the_image_the_deployments_run():
    built = kustomize("deploy/base")
    (job,) = [r for r in built if r["kind"] == "Job"]
    web = [d for d in built if d["kind"] == "Deployment" and d["metadata"]["name"] == "jobdash-web"][0]
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == containers(web)[-1]["image"] != "jobdash"


def test_compose_migrates_once_before_everything_else():
    services = compose()["services"]
    assert "migrate --noinput" in " ".join(services["migrate"]["command"])
    assert services["migrate"]["restart"] == "no"
    for name in ("web", "webhook", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, name
        assert "migrate" not in " ".join(services[name]["command"]), name


# --- probes ---


def probes(deployment: str) -> tuple[dict, dict]:
    (container,) = deployments()[deployment]["spec"]["template"]["spec"]["containers"]
    return container["livenessProbe"], container["readinessProbe"]


def test_worker_answers_a_ping_through_the_broker():
    liveness, readiness = probes("jobdash-worker")
    for probe in (liveness, readiness):
        shell, flag, command = probe["exec"]["command"]
        assert (shell, flag) == ("sh", "-c")
        # its own node (celery@<pod name>), not any worker; the timeout within the probe's
        assert 'celery -A jobdash inspect ping --destination "celery@$HOSTNAME"' in command
        timeout = int(re.search(r"--timeout (\d+)", command).group(1))
        assert timeout < probe["timeoutSeconds"]
    # a restart only after minutes without an answer (a broker restart is ridden out)
    assert liveness["periodSeconds"] * liveness["failureThreshold"] >= 180
    assert "celery -A jobdash worker -Q celery" in (ROOT / "deploy/docker/entrypoint.sh").read_text()


def heartbeat_probe(probe: dict) -> tuple[str, float]:
    """The beat probe's (file, max age) from its Python one-liner."""
    python, flag, code = probe["exec"]["command"]
    assert (python, flag) == ("python", "-c") and "django" not in code.lower()
    (path,) = re.findall(r"os\.stat\('([^']+)'\)", code)
    (max_age,) = re.findall(r"st_mtime > (\d+)", code)
    return path, float(max_age)


def test_beat_probes_read_the_heartbeat_that_its_scheduler_writes():
    from celery.beat import Scheduler

    from jobdash.dispatch.beat import LeaderGatedScheduler
    from jobdash.dispatch.management.commands import beat_heartbeat

    liveness, readiness = probes("jobdash-beat")
    (live_file, live_age), (ready_file, ready_age) = heartbeat_probe(liveness), heartbeat_probe(readiness)
    assert live_file == ready_file == str(beat_heartbeat.HEARTBEAT_FILE)
    assert str(beat_heartbeat.HEARTBEAT_FILE).startswith("/tmp/")  # the emptyDir under a read-only root
    # a healthy beat touches it well within both windows; liveness is the more patient
    assert beat_heartbeat.HEARTBEAT_SECONDS * 2 < ready_age < live_age == beat_heartbeat.DEFAULT_MAX_AGE
    # the entrypoint runs beat with that scheduler, the leader-gated one
    entrypoint = (ROOT / "deploy/docker/entrypoint.sh").read_text()
    (path,) = re.findall(r"celery -A jobdash beat -S (\S+)", entrypoint)
    module, _, cls = path.partition(":")
    assert module == beat_heartbeat.__name__ and cls == "HeartbeatScheduler"
    assert issubclass(beat_heartbeat.HeartbeatScheduler, LeaderGatedScheduler) and issubclass(
        LeaderGatedScheduler, Scheduler
    )
    # compose's healthcheck is the liveness probe's
    test = compose()["services"]["beat"]["healthcheck"]["test"]
    assert test == ["CMD", *liveness["exec"]["command"]]


@pytest.mark.parametrize(("age", "healthy"), [(1, True), (3600, False), (None, False)])
def test_the_beat_probe_itself(tmp_path, age, healthy):
    import os
    import time

    liveness, _ = probes("jobdash-beat")
    path, _ = heartbeat_probe(liveness)
    heartbeat = tmp_path / "heartbeat"
    if age is not None:
        heartbeat.touch()
        os.utime(heartbeat, (time.time() - age, time.time() - age))
    python, flag, code = liveness["exec"]["command"]
    result = subprocess.run([sys.executable, flag, code.replace(path, str(heartbeat))], capture_output=True, timeout=30)
    assert (result.returncode == 0) is healthy, result.stderr


def test_the_heartbeat_scheduler_touches_the_file_every_tick(tmp_path, monkeypatch):
    from django.core.management import CommandError, call_command

    from jobdash.dispatch.beat import LeaderGatedScheduler
    from jobdash.dispatch.management.commands import beat_heartbeat

    heartbeat = tmp_path / "heartbeat"
    monkeypatch.setattr(beat_heartbeat, "HEARTBEAT_FILE", heartbeat)
    ticks = iter([300.0, 0.5, None])  # the leader's next entry far off, soon, a standby's
    monkeypatch.setattr(LeaderGatedScheduler, "tick", lambda self, *a, **k: next(ticks))
    scheduler = beat_heartbeat.HeartbeatScheduler.__new__(beat_heartbeat.HeartbeatScheduler)
    with pytest.raises(CommandError, match="no heartbeat"):
        call_command("beat_heartbeat", file=heartbeat)
    assert scheduler.tick() == beat_heartbeat.HEARTBEAT_SECONDS  # never sleeps past it
    assert heartbeat.exists()
    assert scheduler.tick() == 0.5
    assert scheduler.tick() == beat_heartbeat.HEARTBEAT_SECONDS
    call_command("beat_heartbeat", file=heartbeat, max_age=60)
    with pytest.raises(CommandError, match="ago"):
        call_command("beat_heartbeat", file=heartbeat, max_age=-1)


def test_compose_worker_healthcheck_is_the_probe():
    liveness, _ = probes("jobdash-worker")
    kind, command = compose()["services"]["worker"]["healthcheck"]["test"]
    # compose interpolates $: $$ is a literal one
    assert kind == "CMD-SHELL" and command.replace("$$", "$") in liveness["exec"]["command"][2]


# --- disruptions and spread ---


@pytest.mark.parametrize("name", ["jobdash-web", "jobdash-webhook"])
def test_a_disruption_budget_and_a_spread_keep_a_pod_up(name):
    resources = base_resources()
    deployment = deployments(resources)[name]
    labels = pod_labels(deployment)
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    (budget,) = [b for b in resources if b["kind"] == "PodDisruptionBudget" and selects(b["spec"]["selector"], labels)]
    assert budget["spec"]["minAvailable"] == 1 and "maxUnavailable" not in budget["spec"]
    # its pods, and no other workload's
    for other_name, other in deployments(resources).items():
        if other_name != name:
            assert not selects(budget["spec"]["selector"], pod_labels(other)), other_name
    affinity = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity  # a small cluster still schedules
    (preferred,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    term = preferred["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname" and selects(term["labelSelector"], labels)
    assert preferred["weight"] == 100


# --- NetworkPolicies ---

DNS = {("UDP", 53), ("TCP", 53)}
POSTGRES, REDIS, CONSUL = ("TCP", 5432), ("TCP", 6379), ("TCP", 8500)
APISERVER = {("TCP", 443), ("TCP", 6443)}
EGRESS = {
    "web": DNS | {POSTGRES, REDIS, CONSUL} | APISERVER,
    "webhook": DNS | {POSTGRES, REDIS, CONSUL} | APISERVER,
    "worker": DNS | {POSTGRES, REDIS, CONSUL} | APISERVER,
    "beat": DNS | {POSTGRES, REDIS, CONSUL},  # it never talks to the cluster
    "migrate": DNS | {POSTGRES},
}


def policies(resources=None) -> list[dict]:
    resources = base_resources() if resources is None else resources
    return [r for r in resources if r["kind"] == "NetworkPolicy"]


def ports(rules: list[dict]) -> set[tuple[str, int]]:
    return {(p.get("protocol", "TCP"), p["port"]) for rule in rules for p in rule.get("ports", [])}


def test_everything_is_denied_unless_allowed():
    (deny,) = [p for p in policies() if p["spec"]["podSelector"] == {}]
    assert sorted(deny["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    assert not deny["spec"].get("ingress") and not deny["spec"].get("egress")


@pytest.mark.parametrize("name", [*COMPONENTS, "migrate"])
def test_each_component_has_its_network_policy(name):
    resources = base_resources()
    workload = component(resources, name)
    labels = pod_labels(workload)
    (policy,) = [
        p for p in policies(resources) if p["spec"]["podSelector"] and selects(p["spec"]["podSelector"], labels)
    ]
    assert policy["metadata"]["name"] == f"jobdash-{name}"
    spec = policy["spec"]
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    # egress: by port, to what the component talks to
    assert all(set(rule) == {"ports"} for rule in spec["egress"]), "egress is by port, to any address"
    assert ports(spec["egress"]) == EGRESS[name]
    # ingress: only the component's serving port, from anywhere; nothing for the others
    served = {
        ("TCP", p["containerPort"])
        for c in workload["spec"]["template"]["spec"]["containers"]
        for p in c.get("ports", [])
        if p["name"] != "metrics"
    }
    if name in ("web", "webhook"):
        assert len(served) == 1 and ports(spec["ingress"]) == served
        (rule,) = spec["ingress"]
        assert "from" not in rule  # the webhook's caller, the API server, is not a pod
    else:
        assert not served and not spec.get("ingress"), "no ingress"


def test_the_policies_allow_the_configured_backends():
    config = find(base_resources(), "ConfigMap", "jobdash")["data"]
    consul_port = int(config["CONSUL_HTTP_ADDR"].rsplit(":", 1)[1])
    assert ("TCP", consul_port) == CONSUL
    env = compose()["services"]["web"]["environment"]
    assert ("TCP", int(re.search(r":(\d+)/", env["DATABASE_URL"]).group(1))) == POSTGRES
    assert ("TCP", int(re.search(r":(\d+)/", env["CELERY_BROKER_URL"]).group(1))) == REDIS
    # every pod the base runs is under a policy of its own besides the default deny
    resources = base_resources()
    for workload in (r for r in resources if r["kind"] in ("Deployment", "Job")):
        assert [
            p
            for p in policies(resources)
            if p["spec"]["podSelector"] and selects(p["spec"]["podSelector"], pod_labels(workload))
        ]


def test_the_webhook_policy_says_why_it_admits_anyone():
    text = (ROOT / "deploy/base/network-policy.yaml").read_text()
    assert "API server" in text and "not" in text and "a pod" in text


# --- metrics ---


@pytest.mark.parametrize("name", ["worker", "beat", "webhook"])
def test_metrics_ports_and_their_services(name):
    resources = base_resources()
    workload = component(resources, name)
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    assert {"name": "metrics", "containerPort": 9100} in container["ports"]
    assert {"name": "JOBDASH_METRICS_PORT", "value": "9100"} in container["env"]
    (service,) = [
        s
        for s in resources
        if s["kind"] == "Service"
        and s["metadata"]["labels"].get("jobdash.io/metrics") == "true"
        and selects({"matchLabels": s["spec"]["selector"]}, pod_labels(workload))
    ]
    assert service["spec"]["clusterIP"] == "None"  # one target per pod
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9100, "targetPort": "metrics"}]


def test_gunicorns_workers_export_together():
    resources = base_resources()
    for name in ("web", "webhook"):
        (container,) = component(resources, name)["spec"]["template"]["spec"]["containers"]
        directory = {e["name"]: e.get("value") for e in container["env"]}["PROMETHEUS_MULTIPROC_DIR"]
        assert directory.startswith("/tmp/")
    entrypoint = (ROOT / "deploy/docker/entrypoint.sh").read_text()
    for function in ("web", "webhook"):
        body = re.search(rf"^{function}\(\) \{{\n(.*?)\n\}}", entrypoint, re.S | re.M).group(1)
        assert body.index("metrics_dir") < body.index("exec gunicorn"), function
    spec = importlib.util.spec_from_file_location("gunicorn_conf", ROOT / "deploy/docker/gunicorn.conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    assert conf.child_exit is metrics_hooks.child_exit


def test_a_dead_workers_live_gauges_leave_with_it(tmp_path, monkeypatch):
    """gunicorn's child_exit under PROMETHEUS_MULTIPROC_DIR: the live gauges' files of the
    worker that died go, everything else stays (its counters still count); without the
    directory it does nothing."""
    names = ["gauge_livesum_4242.db", "gauge_max_4242.db", "counter_4242.db", "gauge_livesum_4343.db"]
    for name in names:
        (tmp_path / name).touch()
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    metrics_hooks.child_exit(None, SimpleNamespace(pid=4242))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    metrics_hooks.child_exit(None, SimpleNamespace(pid=4242))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "counter_4242.db",
        "gauge_livesum_4343.db",
        "gauge_max_4242.db",
    ]


@pytest.mark.skipif(kubectl() is None, reason="kubectl (with kustomize) is not installed")
def test_the_monitoring_component():
    built = kustomize("deploy/overlays/monitoring")
    monitors = {m["metadata"]["name"]: m for m in built if m["kind"] == "ServiceMonitor"}
    assert set(monitors) == {"jobdash-web", "jobdash-metrics-port"}
    services = [s for s in built if s["kind"] == "Service"]
    workloads = [w for w in built if w["kind"] == "Deployment"]
    scraped = {}
    for name, monitor in monitors.items():
        validate(monitor)
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["jobdash"]}
        selected = [s for s in services if selects(monitor["spec"]["selector"], s["metadata"]["labels"])]
        for endpoint in monitor["spec"]["endpoints"]:
            # the endpoint's port names a port of every Service it selects, which names a
            # port of the pods behind it
            for service in selected:
                (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
                for workload in workloads:
                    if selects({"matchLabels": service["spec"]["selector"]}, pod_labels(workload)):
                        names = {p["name"] for c in containers(workload) for p in c.get("ports", [])}
                        assert port["targetPort"] in names
                        scraped.setdefault(name, set()).add(pod_labels(workload)[LABEL])
    assert scraped == {"jobdash-web": {"web"}, "jobdash-metrics-port": {"worker", "beat", "webhook"}}
    # the web's over HTTPS, verified with its certificate's CA and DNS name
    (endpoint,) = monitors["jobdash-web"]["spec"]["endpoints"]
    assert (endpoint["scheme"], endpoint["path"]) == ("https", "/metrics")
    certificate = find(built, "Certificate", "jobdash-web-tls")["spec"]
    assert endpoint["tlsConfig"]["ca"]["secret"] == {"name": certificate["secretName"], "key": "ca.crt"}
    assert endpoint["tlsConfig"]["serverName"] in certificate["dnsNames"]
    assert "insecureSkipVerify" not in endpoint["tlsConfig"]
    # the metrics port: Prometheus keeps the beats' own `instance` label
    (endpoint,) = monitors["jobdash-metrics-port"]["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True and endpoint["path"] == "/metrics"
    # the metrics port is opened to Prometheus only, and only that port
    policy = find(built, "NetworkPolicy", "jobdash-metrics")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    assert ports([rule]) == {("TCP", 9100)} and rule["from"]
    opened = {pod_labels(w)[LABEL] for w in workloads if selects(policy["podSelector"], pod_labels(w))}
    assert opened == {"worker", "beat", "webhook"}
    # the dashboard, as the ConfigMap Grafana's sidecar loads
    dashboard = find(built, "ConfigMap", "jobdash-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert (
        dashboard["data"]["grafana-dashboard.json"] == (ROOT / "deploy/monitoring/grafana-dashboard.json").read_text()
    )
    # without the component, nothing of the operator's
    assert not [r for r in kustomize("deploy/base") if r["apiVersion"].startswith("monitoring.coreos.com/")]


# --- the Grafana dashboard ---

PROMQL_WORDS = {
    # aggregations and their modifiers, functions, keywords the dashboard may use
    *("sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "by", "without"),
    *("rate", "irate", "increase", "delta", "changes", "resets", "histogram_quantile"),
    *("clamp_min", "clamp_max", "abs", "time", "vector", "scalar", "label_values", "on", "ignoring"),
    *("and", "or", "unless", "offset", "bool", "group_left", "group_right"),
}


def series_names() -> dict[str, str]:
    """Every series name a query may name -> its family."""
    names = {}
    for family, (kind, _) in FAMILIES.items():
        names[family] = family
        if kind == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                names[family + suffix] = family
    return names


def check_query(expr: str) -> set[str]:
    """The families a PromQL query uses; fails on any other name or on a label that none
    of them has."""
    names = series_names()
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string values
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges ([5m], [$__rate_interval])
    used = {names[n] for n in re.findall(r"\bjobdash_\w+", text) if n in names}
    labels = set().union(*(FAMILIES[f][1] for f in used)) if used else set()
    for name in re.findall(r"\bjobdash_\w+", text):
        assert name in names, f"{name}: not one of jobdash's metric families ({expr})"
    for matchers in re.findall(r"\{([^}]*)\}", text):
        for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers):
            assert label in labels, f"{label}: no label of {sorted(used)} ({expr})"
    for grouping in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", text):
        for label in (g.strip() for g in grouping.split(",") if g.strip()):
            assert label in labels | {"le"}, f"{label}: no label of {sorted(used)} ({expr})"
            assert label != "le" or any(FAMILIES[f][0] == "histogram" for f in used), expr
    rest = re.sub(r"\{[^}]*\}", "", text)
    rest = re.sub(r"\b(?:by|without)\s*\([^)]*\)", "", rest)
    for word in re.findall(r"\b[a-zA-Z_]\w*\b", rest):
        assert word in names or word in PROMQL_WORDS or word == "namespace" and "label_values" in rest, (
            f"{word}: neither a jobdash metric nor PromQL ({expr})"
        )
    return used


def dashboard() -> dict:
    return json.loads((ROOT / "deploy/monitoring/grafana-dashboard.json").read_text())


def all_panels(panels: list[dict]):
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def test_the_dashboard_shows_every_family_and_nothing_else():
    board = dashboard()
    assert board["title"] and board["uid"] and isinstance(board["schemaVersion"], int)
    used = set()
    queries = 0
    ids = set()
    for panel in all_panels(board["panels"]):
        assert panel["id"] not in ids
        ids.add(panel["id"])
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"])
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["targets"], panel.get("title")
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids))
        for target in panel["targets"]:
            used |= check_query(target["expr"])
            queries += 1
    assert used == set(FAMILIES), sorted(set(FAMILIES) - used)
    assert queries >= len(FAMILIES)
    # the variables: a Prometheus data source and the namespaces jobdash_jobs knows
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert check_query(variables["namespace"]["query"]["query"]) == {"jobdash_jobs"}


@pytest.mark.parametrize(
    "expr",
    [
        "sum(rate(jobdash_releases[5m]))",  # not a family's name
        "sum by (namespace) (jobdash_cycle_phase_seconds_count)",  # not its label
        'jobdash_jobs{team="a"}',
        "up",
        "histogram_quantile(0.9, sum by (le) (jobdash_jobs))",
    ],
)
def test_the_dashboard_check_does_catch_mistakes(expr):
    with pytest.raises(AssertionError):
        check_query(expr)


# --- compose's cluster holds every example ---


def compose_cluster():
    from kubesim.config import load

    return load(ROOT / "deploy/compose/kubesim.yaml")


class ConfigRuntimes:
    """kubesim's configured objects as the RuntimeSource a TrainJob's demand is read from."""

    def __init__(self, objects: list[dict]):
        self.objects = objects

    def runtime(self, kind: str, namespace: str, name: str):
        for obj in self.objects:
            meta = obj["metadata"]
            if obj["kind"] == kind and meta["name"] == name and meta.get("namespace", "") == namespace:
                return obj
        return None


def examples() -> list[str]:
    return sorted(p.name for p in (ROOT / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", examples())
def test_every_example_fits_compose_quotas_and_nodes(example):
    from jobdash.cluster.convert import amounts, node
    from kubesim.config import node_objects
    from queueing import Node, parse_job
    from queueing.fit import NodeFailure, NodePool
    from queueing.quota_fit import quota_check
    from queueing.snapshot import Taint, gang_of, node_totals

    cluster = compose_cluster()
    _, workload = parse_job((ROOT / "examples" / example).read_text(), runtimes=ConfigRuntimes(cluster.objects))
    demand = workload.quota_demand()
    quotas = {ns["name"]: amounts(ns.get("quota")) for ns in cluster.namespaces}
    assert workload.namespace in quotas, f"{example}: namespace {workload.namespace} is not in compose's kubesim"
    hard = quotas[workload.namespace]
    assert hard, f"{workload.namespace} has no quota in compose's kubesim"
    never, short = quota_check(demand, hard, hard)
    assert (never, short) == (None, None), f"{example} needs {demand}, {workload.namespace}'s quota is {hard}"
    if workload.namespace == "team-a":
        assert quota_check(demand, quotas["team-a"], quotas["team-a"]) == (None, None)
    # and its pods fit on the empty cluster's nodes at once
    nodes = []
    for group in cluster.nodes:
        for obj in node_objects(group):
            info = node(obj)
            taints = [Taint(t.get("key", ""), t.get("value") or "", t.get("effect", "NoSchedule")) for t in info.taints]
            nodes.append(Node(info.name, info.allocatable, labels=info.labels, taints=tuple(taints)))
    gang = gang_of(workload)
    placed = NodePool(nodes).place(gang, node_totals(gang))
    assert not isinstance(placed, NodeFailure), f"{example}: {placed}"


def test_the_examples_cover_compose_namespaces():
    namespaces = {
        yaml.safe_load((ROOT / "examples" / name).read_text())["metadata"]["namespace"] for name in examples()
    }
    assert "team-a" in namespaces and namespaces <= {ns["name"] for ns in compose_cluster().namespaces}
