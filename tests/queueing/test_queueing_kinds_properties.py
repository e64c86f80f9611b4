"""Property tests for every kind's adapter: generated valid manifests give the demand
computed independently here; breaking one of the kind's rules is refused at a path;
random damage only ever raises ManifestError."""

import copy
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing import ManifestError, workload_from_manifest
from queueing.kinds import FAMILY
from tests.examples import examples
from tests.queueing.kinds_support import Runtimes
from tests.queueing.test_queueing_tfjob_properties import JUNK, locations
from tests.queueing.test_queueing_tfjob_properties import container as container_strategy

SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,14}[a-z0-9])?", fullmatch=True)


@st.composite
def pod_template(draw, required=None):
    """({"spec": pod spec}, per-pod requests, per-pod limits)."""
    names = [required or "main"] + [f"side-{i}" for i in range(draw(st.integers(0, 2)))]
    containers = [draw(container_strategy(name)) for name in names]
    requests, limits = Counter(), Counter()
    for _, container_requests, container_limits in containers:
        requests.update(container_requests)
        limits.update(container_limits)
    spec = {"containers": [c for c, _, _ in draw(st.permutations(containers))]}
    return {"spec": spec}, requests, limits


def expected_of(groups):
    """groups: [(count, requests, limits)] -> (pods, requests, limits) over the whole job."""
    pods, requests, limits = 0, Counter(), Counter()
    for count, group_requests, group_limits in groups:
        pods += count
        for name, amount in group_requests.items():
            requests[name] += count * amount
        for name, amount in group_limits.items():
            limits[name] += count * amount
    return pods, +requests, +limits


def check_totals(manifest, expected, runtimes=None):
    workload = workload_from_manifest(manifest, runtimes)
    pods, requests, limits = expected
    assert workload.pods == pods == sum(p.count for p in workload.pod_sets)
    assert +Counter(workload.requests) == requests
    assert +Counter(workload.limits) == limits
    for name, amount in workload.requests.items():
        assert amount == sum(p.count * p.requests.get(name, 0) for p in workload.pod_sets)
    return workload


def refused_at(manifest, path, runtimes=None):
    try:
        workload_from_manifest(manifest, runtimes)
    except ManifestError as error:
        paths = [e.path for e in error.errors]
        assert path in paths, paths
    else:
        raise AssertionError(f"accepted, expected an error at {path}")


def damaged_only_raises_manifest_error(manifest, data, runtimes=None):
    manifest = copy.deepcopy(manifest)
    for _ in range(data.draw(st.integers(1, 3))):
        parent, key = data.draw(st.sampled_from(list(locations(manifest))))
        action = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "replace":
            parent[key] = data.draw(JUNK)
        elif action == "delete":
            del parent[key]
        elif isinstance(parent[key], dict):
            parent[key][data.draw(st.text(max_size=12) | st.integers())] = data.draw(JUNK)
    try:
        workload = workload_from_manifest(manifest, runtimes)
    except ManifestError as error:
        assert error.errors
    else:
        assert workload.pods >= 0
        assert all(amount >= 0 for amount in workload.quota_demand().values())


# --- the Kubeflow v1 family ------------------------------------------------------------


@st.composite
def kubeflow_job(draw):
    adapter = draw(st.sampled_from(FAMILY))
    bounds = {t: (low, high) for t, low, high in adapter.replica_bounds}
    chosen = {t for t in adapter.replica_types if draw(st.booleans())} | set(adapter.required_types)
    for group in adapter.exclusive_types:
        chosen -= set(sorted(chosen & group)[1:])
    if not chosen:
        chosen = {adapter.replica_types[-1]}
    specs, groups, worker_key = {}, {}, None
    for replica_type in sorted(chosen):
        low, high = bounds.get(replica_type, (0, 20))
        replicas = draw(st.none() | st.integers(low, min(high, 20)))
        template, requests, limits = draw(pod_template(adapter.container_name))
        spellings = [replica_type, replica_type.lower(), replica_type.upper()] if adapter.any_case else [replica_type]
        key = draw(st.sampled_from(spellings))
        specs[key] = {"template": template} if replicas is None else {"replicas": replicas, "template": template}
        groups[replica_type] = [1 if replicas is None else replicas, requests, limits]
        worker_key = key if replica_type == "Worker" else worker_key
    spec = {adapter.replica_specs_field: specs}
    if adapter.elastic and worker_key is not None and groups["Worker"][0] >= 1 and draw(st.booleans()):
        workers = groups["Worker"][0]
        low = draw(st.integers(1, workers))
        spec["elasticPolicy"] = {"minReplicas": low, "maxReplicas": draw(st.integers(workers, workers + 5))}
        # (the Worker asks its replicas: the minimum is its pod set's, for partial admission)
    if draw(st.booleans()):
        spec["runPolicy"] = {"suspend": draw(st.booleans())}
    manifest = {"apiVersion": adapter.api_version, "kind": adapter.kind, "metadata": {"name": draw(NAMES)}}
    manifest["spec"] = spec
    return manifest, adapter, worker_key, expected_of(groups.values())


@given(kubeflow_job())
@SETTINGS
def test_kubeflow_demand_equals_the_independent_sum(generated):
    manifest, adapter, _, expected = generated
    workload = check_totals(manifest, expected)
    assert [p.role for p in workload.pod_sets] == [
        t for t in adapter.replica_types if t in {p.role for p in workload.pod_sets}
    ]


@given(kubeflow_job(), st.data())
@SETTINGS
def test_kubeflow_rule_breakers_are_refused_at_their_path(generated, data):
    manifest, adapter, _, _ = generated
    field = f"spec.{adapter.replica_specs_field}"
    key = data.draw(st.sampled_from(sorted(manifest["spec"][adapter.replica_specs_field])))
    broken = copy.deepcopy(manifest)
    replica_spec = broken["spec"][adapter.replica_specs_field][key]
    breaker = data.draw(st.sampled_from(["negative", "unknown type", "no container", "managedBy", "no image"]))
    if breaker == "negative":
        replica_spec["replicas"] = data.draw(st.integers(-100, -1))
        path = f"{field}.{key}.replicas"
    elif breaker == "unknown type":
        broken["spec"][adapter.replica_specs_field]["Launcher"] = copy.deepcopy(replica_spec)
        path = f"{field}.Launcher"
    elif breaker == "no container":
        for c in replica_spec["template"]["spec"]["containers"]:
            c["name"] = "renamed" if c["name"] == adapter.container_name else c["name"]
        path = f"{field}.{key}.template.spec.containers"
    elif breaker == "managedBy":
        broken["spec"]["runPolicy"] = {"managedBy": data.draw(st.sampled_from(["", "kueue", "example.com/x"]))}
        path = "spec.runPolicy.managedBy"
    else:
        replica_spec["template"]["spec"]["containers"][-1]["image"] = ""
        path = (
            f"{field}.{key}.template.spec.containers[{len(replica_spec['template']['spec']['containers']) - 1}].image"
        )
    refused_at(broken, path)


@given(kubeflow_job(), st.data())
@SETTINGS
def test_kubeflow_damage_only_raises_manifest_error(generated, data):
    damaged_only_raises_manifest_error(generated[0], data)


# --- MPIJob ----------------------------------------------------------------------------


@st.composite
def mpi_job(draw):
    launcher, launcher_requests, launcher_limits = draw(pod_template())
    specs = {"Launcher": {"template": launcher} if draw(st.booleans()) else {"replicas": 1, "template": launcher}}
    groups = [(1, launcher_requests, launcher_limits)]
    if draw(st.booleans()):
        workers = draw(st.integers(1, 30))
        worker, requests, limits = draw(pod_template())
        specs["Worker"] = {"replicas": workers, "template": worker}
        groups.append((workers, requests, limits))
    manifest = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": draw(NAMES)},
        "spec": {"slotsPerWorker": draw(st.integers(0, 8)), "mpiReplicaSpecs": specs},
    }
    return manifest, expected_of(groups)


@given(mpi_job())
@SETTINGS
def test_mpijob_demand_equals_the_independent_sum(generated):
    check_totals(*generated)


@given(mpi_job(), st.data())
@SETTINGS
def test_mpijob_rule_breakers_are_refused_at_their_path(generated, data):
    broken = copy.deepcopy(generated[0])
    specs = broken["spec"]["mpiReplicaSpecs"]
    breaker = data.draw(st.sampled_from(["no launcher", "two launchers", "zero workers", "lower case", "managedBy"]))
    if breaker == "no launcher":
        del specs["Launcher"]
        path = "spec.mpiReplicaSpecs.Launcher"
    elif breaker == "two launchers":
        specs["Launcher"]["replicas"] = data.draw(st.integers(2, 10))
        path = "spec.mpiReplicaSpecs.Launcher.replicas"
    elif breaker == "zero workers":
        specs["Worker"] = {**copy.deepcopy(specs["Launcher"]), "replicas": 0}
        path = "spec.mpiReplicaSpecs.Worker.replicas"
    elif breaker == "lower case":
        specs["worker"] = specs.pop("Worker", copy.deepcopy(specs["Launcher"]))
        path = "spec.mpiReplicaSpecs.worker"
    else:
        broken["spec"]["runPolicy"] = {"managedBy": "kubeflow.org/training-operator"}
        path = "spec.runPolicy.managedBy"
    refused_at(broken, path)


@given(mpi_job(), st.data())
@SETTINGS
def test_mpijob_damage_only_raises_manifest_error(generated, data):
    damaged_only_raises_manifest_error(generated[0], data)


# --- batch Job and JobSet: Job specs ---------------------------------------------------


@st.composite
def job_spec(draw, indexed_default=False):
    """(Job spec, pods running at once, per-pod requests, per-pod limits)."""
    template, requests, limits = draw(pod_template())
    template["spec"]["restartPolicy"] = draw(st.sampled_from(["OnFailure", "Never"]))
    spec = {"template": template}
    parallelism = draw(st.none() | st.integers(0, 40))
    completions = draw(st.none() | st.integers(0, 40))
    mode = draw(st.sampled_from([None, "NonIndexed", "Indexed"]))
    indexed = mode == "Indexed" or (mode is None and indexed_default)
    if indexed and completions is None and parallelism is not None:
        completions = draw(st.integers(0, 40))
    for key, value in (("parallelism", parallelism), ("completions", completions), ("completionMode", mode)):
        if value is not None:
            spec[key] = value
    if parallelism is None and completions is None:
        pods = 1
    else:
        running = 1 if parallelism is None else parallelism
        pods = running if completions is None else min(running, completions)
    return spec, pods, requests, limits


@st.composite
def batch_job(draw):
    spec, pods, requests, limits = draw(job_spec())
    manifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": draw(NAMES)}, "spec": spec}
    return manifest, expected_of([(pods, requests, limits)])


@given(batch_job())
@SETTINGS
def test_batch_job_demand_equals_the_independent_sum(generated):
    check_totals(*generated)


@given(batch_job(), st.data())
@SETTINGS
def test_batch_job_rule_breakers_are_refused_at_their_path(generated, data):
    broken = copy.deepcopy(generated[0])
    breaker = data.draw(st.sampled_from(["parallelism", "completions", "restartPolicy", "containers", "indexed"]))
    if breaker in ("parallelism", "completions"):
        broken["spec"][breaker] = data.draw(st.integers(-50, -1))
        path = f"spec.{breaker}"
    elif breaker == "restartPolicy":
        broken["spec"]["template"]["spec"]["restartPolicy"] = data.draw(st.sampled_from(["Always", "Sometimes"]))
        path = "spec.template.spec.restartPolicy"
    elif breaker == "containers":
        broken["spec"]["template"]["spec"]["containers"] = []
        path = "spec.template.spec.containers"
    else:
        broken["spec"].update(completionMode="Indexed", parallelism=data.draw(st.integers(1, 5)))
        broken["spec"].pop("completions", None)
        path = "spec.completions"
    refused_at(broken, path)


@given(batch_job(), st.data())
@SETTINGS
def test_batch_job_damage_only_raises_manifest_error(generated, data):
    damaged_only_raises_manifest_error(generated[0], data)


@st.composite
def replicated_jobs(draw):
    names = draw(
        st.lists(st.sampled_from(["driver", "workers", "ps", "eval", "node"]), min_size=1, max_size=4, unique=True)
    )
    items, groups = [], []
    for name in names:
        spec, pods, requests, limits = draw(job_spec(indexed_default=True))
        del spec["template"]["spec"]["restartPolicy"]  # JobSet's webhook defaults it
        replicas = draw(st.none() | st.integers(0, 4))
        item = {"name": name, "template": {"spec": spec}}
        if replicas is not None:
            item["replicas"] = replicas
        items.append(item)
        groups.append((pods * (1 if replicas is None else replicas), requests, limits))
    return items, groups


@st.composite
def jobset(draw):
    items, groups = draw(replicated_jobs())
    manifest = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": draw(NAMES)},
        "spec": {"replicatedJobs": items, "suspend": draw(st.booleans())},
    }
    return manifest, expected_of(groups)


@given(jobset())
@SETTINGS
def test_jobset_demand_equals_the_independent_sum(generated):
    workload = check_totals(*generated)
    assert [p.role for p in workload.pod_sets] == [j["name"] for j in generated[0]["spec"]["replicatedJobs"]]


@given(jobset(), st.data())
@SETTINGS
def test_jobset_rule_breakers_are_refused_at_their_path(generated, data):
    broken = copy.deepcopy(generated[0])
    items = broken["spec"]["replicatedJobs"]
    at = data.draw(st.integers(0, len(items) - 1))
    breaker = data.draw(st.sampled_from(["duplicate", "replicas", "parallelism", "name"]))
    if breaker == "duplicate":
        items.append(copy.deepcopy(items[at]))
        path = f"spec.replicatedJobs[{len(items) - 1}].name"
    elif breaker == "replicas":
        items[at]["replicas"] = data.draw(st.integers(-9, -1))
        path = f"spec.replicatedJobs[{at}].replicas"
    elif breaker == "parallelism":
        items[at]["template"]["spec"]["parallelism"] = data.draw(st.integers(-9, -1))
        path = f"spec.replicatedJobs[{at}].template.spec.parallelism"
    else:
        items[at]["name"] = data.draw(st.sampled_from(["Workers", "a_b", "-x", ""]))
        path = f"spec.replicatedJobs[{at}].name"
    refused_at(broken, path)


@given(jobset(), st.data())
@SETTINGS
def test_jobset_damage_only_raises_manifest_error(generated, data):
    damaged_only_raises_manifest_error(generated[0], data)


# --- TrainJob --------------------------------------------------------------------------


@st.composite
def train_job(draw):
    """A TrainJob, its runtime (initializers + a labelled trainer) and the expected demand."""
    items, groups = draw(replicated_jobs())
    kept = [(item, group) for item, group in zip(items, groups, strict=True) if item["name"] != "node"]
    items, groups = [item for item, _ in kept], [group for _, group in kept]
    node_cpu, node_memory = draw(st.integers(0, 8000)), draw(st.integers(0, 2**34))
    node_spec = {
        "containers": [
            {
                "name": "node",
                "image": "pytorch/pytorch",
                "resources": {"requests": {"cpu": f"{node_cpu}m", "memory": str(node_memory)}},
            }
        ]
    }
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": node_spec}},
        },
    }
    policy_nodes = draw(st.none() | st.integers(1, 6))
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt"},
        "spec": {"mlPolicy": {"torch": {}}, "template": {"spec": {"replicatedJobs": [*items, node]}}},
    }
    if policy_nodes is not None:
        runtime["spec"]["mlPolicy"]["numNodes"] = policy_nodes
    trainer = {}
    nodes = draw(st.none() | st.integers(0, 16))
    if nodes is not None:
        trainer["numNodes"] = nodes
    requests = Counter({"cpu": node_cpu, "memory": node_memory})
    if draw(st.booleans()):
        cpu = draw(st.integers(0, 16))
        trainer["resourcesPerNode"] = {"requests": {"cpu": str(cpu)}, "limits": {"cpu": str(cpu)}}
        requests["cpu"] = 1000 * cpu
    count = nodes if nodes is not None else policy_nodes if policy_nodes is not None else 1
    limits = Counter({"cpu": requests["cpu"]}) if "resourcesPerNode" in trainer else Counter()
    manifest = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": draw(NAMES), "namespace": "team-a"},
        "spec": {"runtimeRef": {"name": "rt"}, "trainer": trainer},
    }
    return manifest, Runtimes(runtime), expected_of([*groups, (count, requests, limits)])


@given(train_job())
@SETTINGS
def test_trainjob_demand_equals_the_independent_sum(generated):
    manifest, runtimes, expected = generated
    check_totals(manifest, expected, runtimes)


@given(train_job(), st.data())
@SETTINGS
def test_trainjob_rule_breakers_are_refused_at_their_path(generated, data):
    manifest, runtimes, _ = generated
    broken = copy.deepcopy(manifest)
    breaker = data.draw(st.sampled_from(["missing runtime", "kind", "numNodes", "managedBy", "quantity"]))
    if breaker == "missing runtime":
        broken["spec"]["runtimeRef"]["name"] = "absent"
        path = "spec.runtimeRef.name"
    elif breaker == "kind":
        broken["spec"]["runtimeRef"]["kind"] = "JobSet"
        path = "spec.runtimeRef.kind"
    elif breaker == "numNodes":
        broken["spec"]["trainer"]["numNodes"] = data.draw(st.integers(-9, -1))
        path = "spec.trainer.numNodes"
    elif breaker == "managedBy":
        broken["spec"]["managedBy"] = "kubeflow.org/training-operator"
        path = "spec.managedBy"
    else:
        broken["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"memory": "lots"}}
        path = "spec.trainer.resourcesPerNode.requests.memory"
    refused_at(broken, path, runtimes)


@given(train_job(), st.data())
@SETTINGS
def test_trainjob_damage_only_raises_manifest_error(generated, data):
    manifest, runtimes, _ = generated
    damaged_only_raises_manifest_error(manifest, data, runtimes)
