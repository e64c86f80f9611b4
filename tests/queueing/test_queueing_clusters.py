"""Many clusters, one plan (queueing/clusters.py): every gang inside one cluster, the one it
requires or the clusters its selector names, never beyond a cluster's own ResourceQuota for
its namespace, nothing to a lost cluster; and with one cluster the plan is what it was."""

from hypothesis import given, settings
from hypothesis import strategies as st

from queueing import Node, PendingJob, PodSet, Reason, Snapshot, Workload, plan
from queueing.clusters import CLUSTER_LABEL, PREFERRED_ANNOTATION, SELECTOR_ANNOTATION, Cluster, problems
from queueing.namespace_quota import NamespaceQuota
from queueing.topology import REQUIRED_ANNOTATION

GI = 2**30
NOW = 1_000_000.0
RACK = "topology.jobdash.io/rack"
NAMES = ("east", "west", "north")


def job(job_id: int, workers: int, gpus: int = 1, namespace: str = "team-a", annotations=None) -> PendingJob:
    workload = Workload(
        "TFJob",
        "kubeflow.org/v1",
        f"j{job_id}",
        None,
        (PodSet("Worker", workers, {"cpu": 1000 * gpus, "memory": GI * gpus, "nvidia.com/gpu": gpus}),),
        annotations=annotations or {},
    )
    return PendingJob(job_id, namespace, 0, NOW - 1000 + job_id, workload)


def node(name: str, cluster: str, gpus: int = 8, used: int = 0, rack: str = "r1") -> Node:
    labels = {CLUSTER_LABEL: cluster, RACK: rack, "kubernetes.io/hostname": name}
    return Node(
        name,
        {"cpu": 64_000, "memory": 512 * GI, "nvidia.com/gpu": gpus, "pods": 110},
        {"nvidia.com/gpu": used},
        labels=labels,
    )


def quota(namespace: str, gpus: int, used: int = 0) -> NamespaceQuota:
    key = "requests.nvidia.com/gpu"
    return NamespaceQuota(namespace, {key: gpus}, {key: used})


def clusters_of(decided, nodes) -> dict[int, set[str]]:
    where = {n.name: n.labels[CLUSTER_LABEL] for n in nodes}
    return {a.job_id: {where[name] for _, _, name in a.placement} for a in decided.admissions}


def test_a_gang_goes_whole_into_one_cluster_even_when_two_together_would_hold_it():
    nodes = (node("e1", "east"), node("w1", "west"))  # 8 GPUs each
    decided = plan(Snapshot(NOW, (job(1, 12),), nodes=nodes, clusters=(Cluster("east"), Cluster("west"))))
    assert decided.admissions == ()
    assert decided.pending[1].reason is Reason.NO_NODE_FITS
    assert "likely to start in cluster east" in decided.pending[1].message  # (equally close: the first)
    # With one cluster (no clusters given) the same nodes hold it.
    assert len(plan(Snapshot(NOW, (job(1, 12),), nodes=nodes)).admissions) == 1


def test_a_job_goes_to_the_tightest_cluster_that_holds_it_and_names_it():
    nodes = (node("e1", "east"), node("e2", "east"), node("w1", "west", used=4))
    decided = plan(Snapshot(NOW, (job(1, 4),), nodes=nodes, clusters=(Cluster("east"), Cluster("west"))))
    (admission,) = decided.admissions
    assert admission.cluster == "west"
    assert clusters_of(decided, nodes) == {1: {"west"}}


def test_required_preferred_and_selected_clusters():
    nodes = (node("e1", "east"), node("w1", "west", used=4))
    clusters = (Cluster("east", {"gpu": "a100"}), Cluster("west", {"gpu": "h100"}))
    jobs = (
        job(1, 1, annotations={CLUSTER_LABEL: "east"}),
        job(2, 1, annotations={PREFERRED_ANNOTATION: "east"}),
        job(3, 1, annotations={SELECTOR_ANNOTATION: "gpu=h100"}),
        job(4, 1, annotations={CLUSTER_LABEL: "nowhere"}),
    )
    decided = plan(Snapshot(NOW, jobs, nodes=nodes, clusters=clusters))
    assert {a.job_id: a.cluster for a in decided.admissions} == {1: "east", 2: "east", 3: "west"}
    assert decided.pending[4].reason is Reason.NO_CLUSTER
    assert "requires cluster nowhere" in decided.pending[4].message


def test_a_cluster_full_of_its_own_quota_sends_the_job_to_the_other():
    nodes = (node("e1", "east"), node("w1", "west", used=6))  # east is the roomier
    clusters = (
        Cluster("east", quotas={"team-a": quota("team-a", 4, used=4)}),
        Cluster("west", quotas={"team-a": quota("team-a", 4)}),
    )
    decided = plan(Snapshot(NOW, (job(1, 2),), nodes=nodes, clusters=clusters))
    assert [a.cluster for a in decided.admissions] == ["west"]
    # Short in both now: QuotaExceeded, naming the roomiest cluster (west: 4 free).
    decided = plan(Snapshot(NOW, (job(1, 2), job(2, 3)), nodes=nodes, clusters=clusters))
    assert [a.job_id for a in decided.admissions] == [1]
    assert decided.pending[2].reason is Reason.QUOTA_EXCEEDED
    assert (decided.pending[2].detail["cluster"], decided.pending[2].detail["free"]) == ("west", 2)


def test_a_lost_cluster_takes_nothing_and_a_job_that_requires_it_is_told():
    nodes = (node("e1", "east"), node("w1", "west"))
    clusters = (Cluster("east", lost=True), Cluster("west"))
    jobs = (job(1, 1), job(2, 1, annotations={CLUSTER_LABEL: "east"}))
    decided = plan(Snapshot(NOW, jobs, nodes=nodes, clusters=clusters))
    assert [(a.job_id, a.cluster) for a in decided.admissions] == [(1, "west")]
    assert decided.pending[2].reason is Reason.NO_CLUSTER
    assert "lost (not answering): east" in decided.pending[2].message


def test_a_required_rack_is_a_rack_of_one_cluster_even_when_two_clusters_name_it_alike():
    nodes = (node("e1", "east", rack="r1"), node("w1", "west", rack="r1"))
    request = {REQUIRED_ANNOTATION: RACK}
    decided = plan(
        Snapshot(
            NOW,
            (job(1, 12, annotations=request),),
            nodes=nodes,
            topology_levels=(RACK,),
            clusters=(Cluster("east"), Cluster("west")),
        )
    )
    assert decided.admissions == ()
    assert decided.pending[1].reason is Reason.NO_DOMAIN_FITS


def test_cluster_annotations_are_checked():
    known = {"east": {"gpu": "a100", "region": "eu"}, "west": {"gpu": "h100"}}
    found = problems({CLUSTER_LABEL: "nowhere", SELECTOR_ANNOTATION: "gpu"}, known=known)
    assert [(p.path, "nowhere" in p.message or "key=value" in p.message) for p in found] == [
        ('metadata.annotations["jobdash.io/cluster"]', True),
        ('metadata.annotations["jobdash.io/cluster-selector"]', True),
    ]
    assert problems({CLUSTER_LABEL: "east", SELECTOR_ANNOTATION: "gpu=a100, region=eu"}, known=known) == []
    (none,) = problems({SELECTOR_ANNOTATION: "gpu=v100"}, known=known)
    assert none.message == "no cluster has the labels 'gpu=v100' (east: gpu=a100,region=eu; west: gpu=h100)"
    assert problems({SELECTOR_ANNOTATION: "gpu=v100", CLUSTER_LABEL: "x"}) == []  # one cluster: not checked


@st.composite
def worlds(draw):
    count = draw(st.integers(2, 3))
    names = NAMES[:count]
    nodes = tuple(
        node(f"{name}-{i}", name, used=draw(st.integers(0, 8)))
        for name in names
        for i in range(draw(st.integers(1, 3)))
    )
    namespaces = ("team-a", "team-b")
    clusters = []
    for name in names:
        quotas = {
            ns: quota(ns, draw(st.integers(0, 16)), draw(st.integers(0, 8))) for ns in namespaces if draw(st.booleans())
        }
        clusters.append(Cluster(name, quotas=quotas, lost=draw(st.booleans()) and draw(st.booleans())))
    jobs = []
    for job_id in range(1, draw(st.integers(1, 12)) + 1):
        annotations = {}
        if draw(st.integers(0, 3)) == 0:
            annotations[CLUSTER_LABEL] = draw(st.sampled_from(names))
        jobs.append(
            job(
                job_id,
                draw(st.integers(1, 6)),
                draw(st.sampled_from((1, 2, 4))),
                draw(st.sampled_from(namespaces)),
                annotations,
            )
        )
    return tuple(jobs), nodes, tuple(clusters)


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_every_admission_is_inside_one_allowed_cluster_within_its_quota_there(world):
    jobs, nodes, clusters = world
    decided = plan(Snapshot(NOW, jobs, nodes=nodes, clusters=clusters))
    by_id = {j.id: j for j in jobs}
    by_name = {c.name: c for c in clusters}
    quoted = {ns for c in clusters for ns in c.quotas}
    charged: dict[tuple[str, str], int] = {}
    for admission, where in zip(decided.admissions, clusters_of(decided, nodes).values(), strict=True):
        assert where == {admission.cluster}  # the whole gang in the cluster it names
        cluster = by_name[admission.cluster]
        assert not cluster.lost
        wanted = by_id[admission.job_id].workload.annotations.get(CLUSTER_LABEL)
        assert wanted in (None, admission.cluster)
        namespace = admission.namespace
        if namespace in quoted:
            key = (admission.cluster, namespace)
            charged[key] = charged.get(key, 0) + by_id[admission.job_id].demand["requests.nvidia.com/gpu"]
            q = cluster.quotas[namespace]
            assert charged[key] <= q.hard["requests.nvidia.com/gpu"] - q.used["requests.nvidia.com/gpu"]
    # Every job not admitted has a reason.
    assert set(decided.pending) | {a.job_id for a in decided.admissions} == set(by_id)


def test_a_job_too_big_for_every_quota_it_may_use_never_fits_and_a_cordoned_cluster_is_said_so():
    nodes = (node("e1", "east"), node("e2", "east"), node("w1", "west"), node("w2", "west"))
    quotas = {"east": quota("team-a", 8), "west": quota("team-a", 16)}
    clusters = (Cluster("east", quotas={"team-a": quotas["east"]}), Cluster("west", quotas={"team-a": quotas["west"]}))
    # 24 GPUs: under the 24 summed, over each cluster's own: never, naming the largest.
    decided = plan(Snapshot(NOW, (job(1, 3, gpus=8),), nodes=nodes, clusters=clusters))
    assert decided.pending[1].reason is Reason.NEVER_FITS_QUOTA
    assert decided.pending[1].detail["cluster"] == "west"
    assert "in cluster west (the largest of the clusters it may use) is 16" in decided.pending[1].message
    # 12 GPUs fit west's quota, not east's: not never.
    decided = plan(Snapshot(NOW, (job(2, 3, gpus=4),), nodes=nodes, clusters=clusters))
    assert [a.cluster for a in decided.admissions] == ["west"]
    cordoned = (Cluster("east", cordoned=True), Cluster("west", lost=True))
    decided = plan(Snapshot(NOW, (job(3, 1),), nodes=nodes, clusters=cordoned))
    assert decided.pending[3].message.endswith("lost (not answering): west; cordoned by an admin: east")
