"""Property tests: generated TFJobs, and random damage to them."""

from collections import Counter

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing import ManifestError, Workload, parse_job, workload_from_manifest
from tests.examples import examples

GI = 2**30
SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}


@st.composite
def cpu_quantity(draw, millis):
    """``millis`` millicores written any way Kubernetes accepts."""
    forms = [f"{millis}m", f"{millis // 1000}.{millis % 1000:03d}"]
    if millis % 1000 == 0:
        forms += [str(millis // 1000), millis // 1000]
    return draw(st.sampled_from(forms))


@st.composite
def memory_quantity(draw, size):
    """``size`` bytes written any way Kubernetes accepts."""
    forms = [str(size), size, f"{size * 1000}m"]
    forms += [f"{size // unit}{suffix}" for suffix, unit in SUFFIXES.items() if size % unit == 0]
    if size % 1000 == 0:
        forms.append(f"{size // 1000}e3")
    return draw(st.sampled_from(forms))


@st.composite
def resource_pair(draw, name, amounts, spell):
    """(requests entry, limits entry, effective request, limit) for one resource; None means unset."""
    mode = draw(st.sampled_from(["none", "request", "limit", "both"]))
    request = draw(amounts)
    limit = request + draw(st.integers(0, 4_000)) if mode == "both" else request
    if mode == "none":
        return None, None, 0, None
    if mode == "request":
        return draw(spell(request)), None, request, None
    if mode == "limit":
        # A container with only a limit requests its limit.
        return None, draw(spell(limit)), limit, limit
    return draw(spell(request)), draw(spell(limit)), request, limit


@st.composite
def container(draw, name):
    """A container dict plus the per-container requests/limits we expect, computed by hand."""
    requests, limits, expected_requests, expected_limits = {}, {}, Counter(), Counter()
    for resource, amounts, spell in (
        ("cpu", st.integers(0, 64_000), cpu_quantity),
        ("memory", st.integers(0, 256 * GI), memory_quantity),
    ):
        request, limit, effective, limit_amount = draw(resource_pair(resource, amounts, spell))
        if request is not None:
            requests[resource] = request
        if limit is not None:
            limits[resource] = limit
        if request is not None or limit is not None:
            expected_requests[resource] += effective
        if limit_amount is not None:
            expected_limits[resource] += limit_amount
    gpus = draw(st.none() | st.integers(0, 8))
    if gpus is not None:
        # Extended resources: a limit is required, and a request must equal it.
        limits["nvidia.com/gpu"] = draw(st.sampled_from([gpus, str(gpus)]))
        if draw(st.booleans()):
            requests["nvidia.com/gpu"] = gpus
        expected_requests["nvidia.com/gpu"] += gpus
        expected_limits["nvidia.com/gpu"] += gpus
    spec = {"name": name, "image": "tensorflow/tensorflow:2.15.0", "resources": {}}
    if requests:
        spec["resources"]["requests"] = requests
    if limits:
        spec["resources"]["limits"] = limits
    return spec, expected_requests, expected_limits


@st.composite
def replica_spec(draw, replica_type):
    max_replicas = 1 if replica_type in ("Chief", "Master", "Evaluator") else 20
    replicas = draw(st.none() | st.integers(0, max_replicas))
    extra = draw(st.integers(0, 2))
    containers = [draw(container("tensorflow"))] + [draw(container(f"sidecar-{i}")) for i in range(extra)]
    per_pod_requests, per_pod_limits = Counter(), Counter()
    for _, requests, limits in containers:
        per_pod_requests.update(requests)
        per_pod_limits.update(limits)
    spec = {"template": {"spec": {"containers": [c for c, _, _ in draw(st.permutations(containers))]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    count = 1 if replicas is None else replicas
    return spec, count, per_pod_requests, per_pod_limits


@st.composite
def tfjob(draw):
    """A valid TFJob manifest and the job-wide demand computed independently of queueing."""
    coordinator = draw(st.sampled_from([None, "Chief", "Master"]))
    others = draw(st.sets(st.sampled_from(["PS", "Worker", "Evaluator"]), min_size=0 if coordinator else 1))
    types = ([coordinator] if coordinator else []) + sorted(others)
    replica_specs, pods, requests, limits = {}, 0, Counter(), Counter()
    for replica_type in draw(st.permutations(types)):
        spec, count, per_pod_requests, per_pod_limits = draw(replica_spec(replica_type))
        replica_specs[replica_type] = spec
        pods += count
        for resource, amount in per_pod_requests.items():
            requests[resource] += count * amount
        for resource, amount in per_pod_limits.items():
            limits[resource] += count * amount
    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": draw(st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True))},
        "spec": {"tfReplicaSpecs": replica_specs},
    }
    return manifest, pods, requests, limits


@given(tfjob())
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
def test_demand_equals_the_independent_sum(generated):
    manifest, pods, requests, limits = generated
    demand = workload_from_manifest(manifest).quota_demand()
    assert demand["pods"] == pods
    assert demand["requests.cpu"] == demand["cpu"] == requests["cpu"]
    assert demand["requests.memory"] == demand["memory"] == requests["memory"]
    assert demand.get("requests.nvidia.com/gpu", 0) == requests["nvidia.com/gpu"]
    assert demand["limits.cpu"] == limits["cpu"]
    assert demand["limits.memory"] == limits["memory"]
    assert demand["count/tfjobs.kubeflow.org"] == 1


@given(tfjob())
@settings(max_examples=examples(100), suppress_health_check=[HealthCheck.too_slow])
def test_yaml_text_gives_the_same_workload_as_the_dict(generated):
    manifest = generated[0]
    expected = workload_from_manifest(manifest)
    loaded, workload = parse_job(yaml.safe_dump(manifest))
    assert loaded == manifest
    assert workload == expected
    assert Workload.from_json(workload.to_json()) == workload


def locations(value, trail=()):
    """Every (container, key) inside ``value``, for picking a place to damage."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield value, key
            yield from locations(child, trail + (key,))
    elif isinstance(value, list):
        for position, child in enumerate(value):
            yield value, position
            yield from locations(child, trail + (position,))


JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=10)
    | st.sampled_from(["lots", "-1Gi", "1e400", "0.5", "Worker", "tensorflow", "", "1.5Gi", "NoExecute", "Always"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


@given(tfjob(), st.data())
@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
def test_damaged_manifests_only_raise_manifest_error(generated, data):
    manifest = generated[0]
    for _ in range(data.draw(st.integers(1, 3))):
        spots = list(locations(manifest))
        parent, key = data.draw(st.sampled_from(spots))
        action = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "replace":
            parent[key] = data.draw(JUNK)
        elif action == "delete":
            del parent[key]
        elif isinstance(parent[key], dict):
            parent[key][data.draw(st.text(max_size=12) | st.integers())] = data.draw(JUNK)
    try:
        workload = workload_from_manifest(manifest)
    except ManifestError as error:
        assert error.errors
    else:
        assert workload.pods >= 0
        assert all(amount >= 0 for amount in workload.quota_demand().values())


@given(tfjob(), st.data())
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_damaged_yaml_text_only_raises_manifest_error(generated, data):
    text = yaml.safe_dump(generated[0])
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 20)))
    damaged = text[:start] + data.draw(st.text(max_size=10)) + text[end:]
    try:
        parse_job(damaged)
    except ManifestError as error:
        assert error.errors
