"""Property tests: plans on random snapshots never break the admission rule.

Every property is checked against the snapshot itself, with arithmetic
written out here rather than borrowed from the planner.
"""

import os
import random
from collections import Counter, defaultdict

from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from queueing import (
    POLICY_NAMES,
    InFlightJob,
    NamespaceQuota,
    Node,
    PendingJob,
    PodSet,
    Reason,
    RunningJob,
    Snapshot,
    Taint,
    Workload,
    plan,
)
from queueing.node_affinity import Requirement, Term
from tests.examples import examples

GI = 2**30
NOW = 1_000_000.0
NAMESPACES = ("team-a", "team-b", "team-c")
QUOTA_KEYS = (
    "requests.cpu",
    "cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
    "requests.nvidia.com/gpu",
    "pods",
    "count/tfjobs.kubeflow.org",
)
TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
NODE_NAMES = ("n0", "n1", "n2", "n3", "n4", "n5")
# QUEUEING_EXAMPLES=2000 for a long hunt; the default keeps the suite fast.
SETTINGS = settings(
    max_examples=examples(int(os.environ.get("QUEUEING_EXAMPLES", 120))),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# Required node affinity over the generated nodes' labels (pool, and zone and gen on some)
# and names: every operator, terms ORed, an empty term now and then.
EXPRESSIONS = st.one_of(
    st.builds(
        Requirement,
        st.just("zone"),
        st.sampled_from(["In", "NotIn"]),
        st.sets(st.sampled_from("xyz"), min_size=1).map(tuple),
    ),
    st.builds(Requirement, st.sampled_from(["zone", "gen", "pool"]), st.sampled_from(["Exists", "DoesNotExist"])),
    st.builds(Requirement, st.just("gen"), st.sampled_from(["Gt", "Lt"]), st.integers(0, 5).map(lambda n: (str(n),))),
    st.builds(Requirement, st.just("pool"), st.just("In"), st.just(("a",))),
)
FIELDS = st.builds(
    Requirement,
    st.just("metadata.name"),
    st.sampled_from(["In", "NotIn"]),
    st.sampled_from(NODE_NAMES).map(lambda n: (n,)),
)
TERMS = st.lists(
    st.builds(Term, st.lists(EXPRESSIONS, max_size=2).map(tuple), st.lists(FIELDS, max_size=1).map(tuple)),
    min_size=1,
    max_size=2,
).map(tuple)


@st.composite
def pod_sets(draw, affinity=False):
    """``affinity``: every pod set has a required node affinity; else one in four has."""
    sets = []
    for role in draw(st.lists(st.sampled_from(["Chief", "PS", "Worker"]), min_size=1, max_size=2, unique=True)):
        requests = {"cpu": draw(st.integers(0, 4)) * 500, "memory": draw(st.integers(0, 4)) * GI}
        limits = {}
        if draw(st.booleans()):
            requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            limits["cpu"] = requests["cpu"] + draw(st.integers(0, 2)) * 500
        if draw(st.booleans()):
            limits["memory"] = requests["memory"]
        selector = draw(st.sampled_from([{}, {}, {"pool": "a"}, {"pool": "b"}]))
        tolerations = (TOLERATION,) if draw(st.booleans()) else ()
        terms = draw(TERMS) if affinity or draw(st.integers(0, 3)) == 0 else ()
        count = draw(st.integers(1, 1 if role == "Chief" else 4))
        sets.append(PodSet(role, count, requests, limits, selector, tolerations, terms))
    return tuple(sets)


@st.composite
def workloads(draw, affinity=False):
    return Workload("TFJob", "kubeflow.org/v1", "j", None, draw(pod_sets(affinity)))


@st.composite
def nodes(draw):
    result = []
    for index in range(draw(st.integers(0, len(NODE_NAMES)))):
        labels = {"pool": draw(st.sampled_from("ab"))}
        if draw(st.booleans()):
            labels["zone"] = draw(st.sampled_from("xyz"))
        if draw(st.booleans()):
            labels["gen"] = draw(st.sampled_from(["1", "3", "5", "10", "4x"]))  # "4x" is no integer
        allocatable = {
            "cpu": draw(st.integers(1, 8)) * 1000,
            "memory": draw(st.integers(1, 16)) * GI,
            "pods": draw(st.integers(1, 8)),
        }
        if draw(st.booleans()):
            allocatable["nvidia.com/gpu"] = draw(st.integers(1, 8))
        allocated = {name: draw(st.integers(0, amount)) for name, amount in allocatable.items()}
        result.append(
            Node(
                NODE_NAMES[index],
                allocatable,
                allocated,
                labels,
                (Taint("gpu", "true"),) if draw(st.booleans()) else (),
                unschedulable=draw(st.integers(0, 5)) == 0,
            )
        )
    return tuple(result)


@st.composite
def quotas(draw):
    result = {}
    for namespace in NAMESPACES:
        if draw(st.integers(0, 3)) == 0:
            continue  # no ResourceQuota: unconstrained
        keys = draw(st.lists(st.sampled_from(QUOTA_KEYS), min_size=1, max_size=4, unique=True))
        scale = {"requests.memory": GI, "limits.memory": GI, "requests.cpu": 1000, "cpu": 1000, "limits.cpu": 1000}
        hard = {key: draw(st.integers(0, 12)) * scale.get(key, 1) for key in keys}
        used = {key: draw(st.integers(0, 12)) * scale.get(key, 1) for key in keys if draw(st.booleans())}
        result[namespace] = NamespaceQuota(namespace, hard, used, weight=draw(st.integers(1, 3)))
    return result


@st.composite
def snapshots(draw, affinity=False):
    """``affinity``: every pending job's pod sets have a required node affinity."""
    node_list = draw(nodes())
    pending = []
    for job_id in range(1, draw(st.integers(0, 14)) + 1):
        backoff = NOW + 100 if draw(st.integers(0, 6)) == 0 else None
        pending.append(
            PendingJob(
                job_id,
                draw(st.sampled_from(NAMESPACES)),
                draw(st.integers(0, 2)),
                NOW - draw(st.integers(0, 4)) * 1800.0,
                draw(workloads(affinity)),
                backoff_until=backoff,
                expected_duration=draw(st.none() | st.floats(60, 7200)),
            )
        )
    in_flight = []
    for job_id in range(100, 100 + draw(st.integers(0, 2))):
        workload = draw(workloads())
        placements = ()
        if node_list and draw(st.booleans()):
            pod_set = workload.pod_sets[0]
            placements = tuple((pod_set.role, i, draw(st.sampled_from(node_list)).name) for i in range(pod_set.count))
        in_flight.append(
            InFlightJob(
                job_id,
                draw(st.sampled_from(NAMESPACES)),
                workload,
                placements,
                {"pods": draw(st.integers(0, 3)), "requests.cpu": draw(st.integers(0, 2)) * 1000},
                NOW - 30,
            )
        )
    running = [
        RunningJob(
            200 + i,
            draw(st.sampled_from(NAMESPACES)),
            draw(workloads()),
            NOW - 600,
            draw(st.none() | st.floats(NOW, NOW + 7200)),
        )
        for i in range(draw(st.integers(0, 3)))
    ]
    return Snapshot(
        NOW,
        tuple(pending),
        tuple(in_flight),
        tuple(running),
        draw(quotas()),
        node_list,
        node_fit=draw(st.integers(0, 4)) > 0,
    )


def reserved(snapshot, namespace):
    total = Counter()
    for job in snapshot.in_flight:
        if job.namespace == namespace:
            total.update(job.outstanding)
    return total


def assert_within_quota(snapshot, result):
    """No namespace's admissions, with its usage and in-flight reservations, exceed any hard limit."""
    jobs = {job.id: job for job in snapshot.pending}
    for namespace, quota in snapshot.quotas.items():
        admitted = Counter()
        for admission in result.admissions:
            if admission.namespace == namespace:
                admitted.update(jobs[admission.job_id].workload.quota_demand())
        for key, hard in quota.hard.items():
            if admitted[key]:
                assert quota.used.get(key, 0) + reserved(snapshot, namespace)[key] + admitted[key] <= hard, key


def requirement_holds(requirement, node):
    """kube-scheduler's reading of one requirement, written out."""
    if requirement.key == "metadata.name":
        return (node.name in requirement.values) == (requirement.operator == "In")
    label = node.labels.get(requirement.key)
    if requirement.operator in ("In", "NotIn"):
        return (label in requirement.values) == (requirement.operator == "In")
    if requirement.operator in ("Exists", "DoesNotExist"):
        return (label is not None) == (requirement.operator == "Exists")
    if label is None or not label.isdigit():
        return False
    bound = int(requirement.values[0])
    return int(label) > bound if requirement.operator == "Gt" else int(label) < bound


def affinity_admits(pod_set, node):
    """Some term with at least one requirement whose requirements all hold; no terms: any node."""
    terms = pod_set.node_affinity
    return not terms or any(
        (term.expressions or term.fields) and all(requirement_holds(r, node) for r in term.expressions + term.fields)
        for term in terms
    )


def fits_some_node(snapshot, pod_set, capacity):
    """Whether one pod of ``pod_set`` fits ``capacity(node)`` on some eligible node."""
    for node in snapshot.nodes:
        if node.unschedulable or any(node.labels.get(k) != v for k, v in pod_set.node_selector.items()):
            continue
        if not affinity_admits(pod_set, node):
            continue
        if any(t.effect != "PreferNoSchedule" and not t.tolerated_by(pod_set.tolerations) for t in node.taints):
            continue
        room = dict(capacity(node))
        room.setdefault("pods", 10**9)  # a node reporting no pod limit has none
        needs = {**{k: v for k, v in pod_set.requests.items() if v}, "pods": 1}
        if all(room.get(k, 0) >= v for k, v in needs.items()):
            return True
    return False


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES))
def test_admissions_never_push_a_namespace_over_any_hard_quota(snapshot, policy):
    assert_within_quota(snapshot, plan(snapshot, policy))


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES))
def test_every_admitted_gang_fits_its_placement_and_placements_never_overlap(snapshot, policy):
    result = plan(snapshot, policy)
    if not (snapshot.node_fit and policy != "seed"):
        assert all(admission.placement is None for admission in result.admissions)
        return
    by_name = {node.name: node for node in snapshot.nodes}
    jobs = {job.id: job for job in snapshot.pending}
    charged = defaultdict(Counter)  # node -> requests of this cycle's pods
    for admission in result.admissions:
        workload = jobs[admission.job_id].workload
        expected = sorted((p.role, i) for p in workload.pod_sets for i in range(p.count))
        assert sorted((role, index) for role, index, _ in admission.placement) == expected
        pod_sets = {p.role: p for p in workload.pod_sets}
        for role, _, node_name in admission.placement:
            node, pod_set = by_name[node_name], pod_sets[role]
            assert not node.unschedulable
            assert all(node.labels.get(k) == v for k, v in pod_set.node_selector.items())
            assert affinity_admits(pod_set, node)
            assert all(t.tolerated_by(pod_set.tolerations) for t in node.taints)
            charged[node_name].update({k: v for k, v in pod_set.requests.items() if v})
            charged[node_name]["pods"] += 1
    for node_name, requests in charged.items():
        node = by_name[node_name]
        earlier = Counter()
        for job in snapshot.in_flight:
            pod_sets = {p.role: p for p in job.workload.pod_sets}
            for role, _, placed_on in job.placements:
                if placed_on == node_name:
                    earlier.update({k: v for k, v in pod_sets[role].requests.items() if v})
                    earlier["pods"] += 1
        for name, amount in requests.items():
            if name == "pods" and "pods" not in node.allocatable:
                continue
            assert node.allocated.get(name, 0) + earlier[name] + amount <= node.allocatable.get(name, 0), name


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(affinity=True), st.sampled_from(POLICY_NAMES))
def test_an_admitted_gangs_pods_are_only_on_nodes_their_required_affinity_admits(snapshot, policy):
    """Each pod is pinned to its planned node, so a node its affinity excludes would hold it forever."""
    result = plan(snapshot, policy)
    by_name = {node.name: node for node in snapshot.nodes}
    jobs = {job.id: job for job in snapshot.pending}
    for admission in result.admissions:
        pod_sets = {p.role: p for p in jobs[admission.job_id].workload.pod_sets}
        for role, _, node_name in admission.placement or ():
            assert affinity_admits(pod_sets[role], by_name[node_name]), (role, node_name)
    for job_id, status in result.pending.items():
        if status.reason is Reason.NEVER_FITS_NODES:
            assert not all(fits_some_node(snapshot, p, lambda n: n.allocatable) for p in jobs[job_id].workload.pod_sets)


def test_the_affinity_property_is_not_vacuous():
    """The worlds it is checked on include gangs placed where their affinity kept them off a
    node with room for them: the check is not met by chance."""

    def decided_by_affinity(snapshot):
        result = plan(snapshot, "priority")
        jobs = {job.id: job for job in snapshot.pending}
        for admission in result.admissions:
            for pod_set in jobs[admission.job_id].workload.pod_sets:
                if any(would_take(pod_set, node) and not affinity_admits(pod_set, node) for node in snapshot.nodes):
                    return True
        return False

    def would_take(pod_set, node):
        """But for its affinity, the empty node would take a pod of the pod set."""
        room = {"pods": 10**9, **node.allocatable}
        return (
            not node.unschedulable
            and all(node.labels.get(k) == v for k, v in pod_set.node_selector.items())
            and all(t.effect == "PreferNoSchedule" or t.tolerated_by(pod_set.tolerations) for t in node.taints)
            and all(room.get(k, 0) >= v for k, v in pod_set.requests.items() if v)
        )

    quick = settings(max_examples=2000, database=None, phases=[Phase.generate])  # any one will do: no shrinking
    find(snapshots(affinity=True), decided_by_affinity, settings=quick)


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES))
def test_no_admitted_job_never_fits_and_never_fits_reasons_are_true(snapshot, policy):
    result = plan(snapshot, policy)
    jobs = {job.id: job for job in snapshot.pending}
    node_fit = snapshot.node_fit and policy != "seed"
    for admission in result.admissions:
        job = jobs[admission.job_id]
        quota = snapshot.quotas.get(job.namespace)
        if quota is not None:
            demand = job.workload.quota_demand()
            assert all(demand.get(key, 0) <= hard for key, hard in quota.hard.items())
        if node_fit:
            assert all(fits_some_node(snapshot, p, lambda n: n.allocatable) for p in job.workload.pod_sets)
    for job_id, status in result.pending.items():
        job = jobs[job_id]
        if status.reason is Reason.NEVER_FITS_QUOTA:
            key = status.detail["resource"]
            assert job.workload.quota_demand()[key] > snapshot.quotas[job.namespace].hard[key]
        if status.reason is Reason.NEVER_FITS_NODES:
            assert not all(fits_some_node(snapshot, p, lambda n: n.allocatable) for p in job.workload.pod_sets)


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES))
def test_every_pending_job_has_a_position_a_reason_and_a_message(snapshot, policy):
    result = plan(snapshot, policy)
    assert set(result.pending).isdisjoint(result.admitted)
    assert set(result.pending) | set(result.admitted) == {job.id for job in snapshot.pending}
    positions = defaultdict(list)
    for status in result.pending.values():
        assert isinstance(status.reason, Reason)
        assert status.message and "\n" not in status.message
        assert status.eta is None or status.eta >= snapshot.now
        assert status.eta is not None or status.eta_note
        positions[status.namespace].append(status.position)
    for namespace, found in positions.items():
        assert sorted(found) == list(range(1, len(found) + 1)), namespace


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES), st.randoms(use_true_random=False))
def test_same_snapshot_same_plan_whatever_the_order_of_pending_jobs(snapshot, policy, rng):
    first = plan(snapshot, policy)
    assert plan(snapshot, policy) == first
    shuffled = list(snapshot.pending)
    rng.shuffle(shuffled)
    again = Snapshot(
        snapshot.now,
        tuple(shuffled),
        snapshot.in_flight,
        snapshot.running,
        snapshot.quotas,
        snapshot.nodes,
        snapshot.node_fit,
    )
    assert plan(again, policy) == first


def article(snapshot):
    """The source article's cycle, written out: per namespace with no in-flight job, of the
    queued jobs whose demand fits hard - used, release the one with the largest CPU request."""
    busy = {job.namespace for job in snapshot.in_flight}
    chosen = set()
    for namespace in {job.namespace for job in snapshot.pending} - busy:
        quota = snapshot.quotas.get(namespace)
        candidates = []
        for job in snapshot.pending:
            if job.namespace != namespace or (job.backoff_until or 0) > snapshot.now:  # backoff: jobdash's own rule
                continue
            demand = job.workload.quota_demand()
            # As Kubernetes does, a key constrains only jobs that request some of it.
            if quota is None or all(
                quota.used.get(k, 0) + demand[k] <= h for k, h in quota.hard.items() if demand.get(k)
            ):
                candidates.append(job)
        if candidates:
            best = max(candidates, key=lambda j: (j.workload.requests.get("cpu", 0), -j.submitted_at, -j.id))
            chosen.add(best.id)
    return chosen


@SETTINGS
@given(snapshots())
def test_seed_picks_exactly_what_the_article_says(snapshot):
    result = plan(snapshot, "seed")
    assert set(result.admitted) == article(snapshot)
    assert all(admission.placement is None for admission in result.admissions)


def test_the_article_reference_is_not_vacuous():
    rng = random.Random(3)
    workload = Workload("TFJob", "kubeflow.org/v1", "j", None, (PodSet("Worker", 1, {"cpu": 1000}),))
    pending = tuple(PendingJob(i, rng.choice(NAMESPACES), 0, NOW, workload) for i in range(1, 9))
    assert len(article(Snapshot(NOW, pending))) == len({job.namespace for job in pending})
