"""Suspending a running job of every kind and resuming it: the pods go (quota and nodes
freed), the kind's Suspended condition, and the work clock keeps the work done up to the
last checkpoint (``kubesim.io/checkpoint-seconds``), so the resumed job only does the rest."""

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from kubesim.clock import rfc3339
from kubesim.cluster import Cluster
from kubesim.testing import (
    batch_job_manifest,
    jaxjob_manifest,
    jobset_manifest,
    mpijob_manifest,
    paddlejob_manifest,
    pytorchjob_manifest,
    tfjob_manifest,
    training_runtime_manifest,
    trainjob_manifest,
    xgboostjob_manifest,
)

NS = "team-a"


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str
    manifest: Callable[..., dict]
    suspend_path: tuple[str, ...]  # where the kind's suspend field lives under spec
    suspended: dict[str, tuple[str, str]]  # conditions (status, reason) while suspended
    resumed: dict[str, tuple[str, str]]  # conditions once resumed and running again
    done: str  # the condition type that says the work finished
    start_time: bool = True  # status.startTime, reset when the job is resumed

    def __str__(self) -> str:
        return self.kind


def _training(kind: str, plural: str, manifest: Callable[..., dict]) -> Kind:
    return Kind(
        kind,
        "kubeflow.org",
        "v1",
        plural,
        manifest,
        ("runPolicy", "suspend"),
        {"Suspended": ("True", f"{kind}Suspended"), "Running": ("False", f"{kind}Suspended")},
        {"Suspended": ("False", f"{kind}Resumed"), "Running": ("True", f"{kind}Running")},
        "Succeeded",
    )


KINDS = [
    _training("TFJob", "tfjobs", lambda name, **kw: tfjob_manifest(name, NS, chief=True, workers=2, **kw)),
    _training("PyTorchJob", "pytorchjobs", lambda name, **kw: pytorchjob_manifest(name, NS, workers=2, **kw)),
    _training("XGBoostJob", "xgboostjobs", lambda name, **kw: xgboostjob_manifest(name, NS, workers=1, **kw)),
    _training("PaddleJob", "paddlejobs", lambda name, **kw: paddlejob_manifest(name, NS, workers=2, **kw)),
    _training("JAXJob", "jaxjobs", lambda name, **kw: jaxjob_manifest(name, NS, workers=2, **kw)),
    Kind(
        "MPIJob",
        "kubeflow.org",
        "v2beta1",
        "mpijobs",
        lambda name, **kw: mpijob_manifest(name, NS, workers=2, **kw),
        ("runPolicy", "suspend"),
        {"Suspended": ("True", "MPIJobSuspended"), "Running": ("False", "MPIJobSuspended")},
        {"Suspended": ("False", "MPIJobResumed"), "Running": ("True", "MPIJobRunning")},
        "Succeeded",
    ),
    Kind(
        "Job",
        "batch",
        "v1",
        "jobs",
        lambda name, **kw: batch_job_manifest(name, NS, parallelism=2, completions=2, **kw),
        ("suspend",),
        {"Suspended": ("True", "JobSuspended")},
        {"Suspended": ("False", "JobResumed")},
        "Complete",
    ),
    Kind(
        "JobSet",
        "jobset.x-k8s.io",
        "v1alpha2",
        "jobsets",
        lambda name, **kw: jobset_manifest(name, NS, jobs=2, workers=2, **kw),
        ("suspend",),
        {"Suspended": ("True", "SuspendedJobs")},
        {"Suspended": ("False", "ResumeJobs")},
        "Completed",
        start_time=False,
    ),
    Kind(
        "TrainJob",
        "trainer.kubeflow.org",
        "v1alpha1",
        "trainjobs",
        lambda name, **kw: trainjob_manifest(name, NS, num_nodes=2, **kw),
        ("suspend",),
        {"Suspended": ("True", "Suspended")},
        {"Suspended": ("False", "Resumed")},
        "Complete",
        start_time=False,
    ),
]
TFJOB = KINDS[0]


class Driver:
    """One job of a kind, created, suspended and resumed through the API as a client would."""

    def __init__(self, sim, custom, kind: Kind, name: str = "j"):
        self.sim, self.custom, self.kind, self.name = sim, custom, kind, name
        self.key = (kind.plural, NS, name)
        if kind.kind == "TrainJob":
            custom.create_cluster_custom_object(
                kind.group, kind.version, "clustertrainingruntimes", training_runtime_manifest()
            )

    def create(self, **kw) -> dict:
        k = self.kind
        return self.custom.create_namespaced_custom_object(
            k.group, k.version, NS, k.plural, k.manifest(self.name, **kw)
        )

    def delete(self) -> None:
        k = self.kind
        self.custom.delete_namespaced_custom_object(k.group, k.version, NS, k.plural, self.name)
        self.sim.settle()

    def set_suspend(self, value: bool) -> None:
        patch: dict = {"spec": {}}
        inner = patch["spec"]
        *parents, leaf = self.kind.suspend_path
        for field in parents:
            inner = inner.setdefault(field, {})
        inner[leaf] = value
        k = self.kind
        self.custom.patch_namespaced_custom_object(k.group, k.version, NS, k.plural, self.name, patch)
        self.sim.settle()

    def status(self) -> dict:
        return self.sim.cluster.job(f"{self.kind.plural}.{self.kind.group}", NS, self.name).get("status") or {}

    def conditions(self) -> dict[str, tuple[str, str]]:
        return {c["type"]: (c["status"], c["reason"]) for c in self.status().get("conditions", [])}

    def done(self) -> bool:
        return self.conditions().get(self.kind.done, ("False", ""))[0] == "True"

    def pods(self) -> list[dict]:
        return self.sim.cluster.pods_of(self.kind.kind, NS, self.name)

    def progress(self) -> tuple[float, float | None]:
        return self.sim.cluster.work.progress(self.key)

    def wait_running(self, limit: int = 60) -> float:
        """Advance a second at a time until the whole gang runs; when its run began."""
        for _ in range(limit):
            since = self.progress()[1]
            if since is not None:
                return since
            self.sim.advance(1)
        raise AssertionError(f"{self.kind} {self.name}: the gang never ran; pods {self.pods()}")

    def advance_to(self, at: float) -> None:
        self.sim.advance(at - self.sim.clock.now())


def used(sim) -> dict:
    return dict(sim.cluster.quota_status(NS).get("used") or {})


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_suspend_frees_the_pods_and_resume_does_only_the_work_after_the_last_checkpoint(sim, custom, kind):
    job = Driver(sim, custom, kind)
    before = used(sim)
    job.create(duration=3600, checkpoint=600)
    started = job.wait_running()
    assert used(sim) != before and job.progress() == (0.0, started)
    job.advance_to(started + 1000)
    assert not job.done()

    job.set_suspend(True)
    assert job.pods() == []
    assert used(sim) == before  # quota usage back to what it was
    assert sim.cluster.pods(NS) == []  # nothing left on the nodes either
    for ctype, expected in kind.suspended.items():
        assert job.conditions()[ctype] == expected, ctype
    assert job.progress() == (600.0, None)  # 1000 s run: the work up to the checkpoint at 600 s

    sim.advance(500)  # suspended: no pods come back and no work is done
    assert job.pods() == [] and job.progress() == (600.0, None) and not job.done()

    resumed = sim.clock.now()
    job.set_suspend(False)
    if kind.start_time:
        assert job.status()["startTime"] == rfc3339(resumed)
    restarted = job.wait_running()
    assert job.progress() == (600.0, restarted)
    for ctype, expected in kind.resumed.items():
        assert job.conditions()[ctype] == expected, ctype
    job.advance_to(restarted + 3000 - 1)
    assert not job.done()
    assert all(p["status"]["phase"] == "Running" for p in job.pods())
    sim.advance(1)  # 3600 - 600 s after the gang runs again
    assert job.done()
    assert job.progress() == (0.0, None)


def test_without_a_checkpoint_annotation_every_1800_seconds_are_kept(sim, custom):
    job = Driver(sim, custom, TFJOB)
    job.create(duration=5000)
    started = job.wait_running()
    job.advance_to(started + 2000)
    job.set_suspend(True)
    assert job.progress() == (1800.0, None)
    job.set_suspend(False)
    started = job.wait_running()
    job.advance_to(started + 1000)  # less than a checkpoint: nothing more is kept
    job.set_suspend(True)
    assert job.progress() == (1800.0, None)
    job.set_suspend(False)
    started = job.wait_running()
    job.advance_to(started + 3200 - 1)
    assert not job.done()
    sim.advance(1)
    assert job.done()


def test_kept_work_adds_up_over_interruptions(sim, custom):
    job = Driver(sim, custom, TFJOB)
    job.create(duration=3600, checkpoint=600)
    for run, kept in ((1000, 600.0), (700, 1200.0), (1799, 2400.0)):
        started = job.wait_running()
        job.advance_to(started + run)
        job.set_suspend(True)
        assert job.progress() == (kept, None)
        job.set_suspend(False)
    started = job.wait_running()
    job.advance_to(started + 1200 - 1)
    assert not job.done()
    sim.advance(1)
    assert job.done()


def test_a_deleted_pod_breaks_the_gang_and_the_rerun_resumes_from_the_checkpoint(sim, custom, core):
    job = Driver(sim, custom, TFJOB)
    job.create(duration=3600, checkpoint=600)
    started = job.wait_running()
    job.advance_to(started + 1300)
    core.delete_namespaced_pod("j-worker-1", NS)
    sim.settle()
    assert job.progress() == (1200.0, None)  # the operator made the pod again; it is not running yet
    started = job.wait_running()
    job.advance_to(started + 2400 - 1)
    assert not job.done()
    sim.advance(1)
    assert job.done()


def test_a_container_restarted_in_place_goes_back_to_the_last_checkpoint(sim, custom):
    job = Driver(sim, custom, KINDS[1])  # a PyTorchJob: restartPolicy OnFailure, the kubelet restarts it
    job.create(duration=3600, checkpoint=600)
    started = job.wait_running()
    job.advance_to(started + 1300)
    sim.cluster.kubelet.terminate((NS, "j-master-0"), 1, sim.clock.now())
    sim.settle()
    pod = next(p for p in job.pods() if p["metadata"]["name"] == "j-master-0")
    assert pod["status"]["phase"] == "Running" and pod["status"]["containerStatuses"][0]["restartCount"] == 1
    assert job.progress() == (1200.0, sim.clock.now())
    job.advance_to(sim.clock.now() + 2400 - 1)
    assert not job.done()
    sim.advance(1)
    assert job.done()


def test_a_job_deleted_and_created_again_starts_from_zero(sim, custom):
    job = Driver(sim, custom, TFJOB)
    first = job.create(duration=3600, checkpoint=600)
    started = job.wait_running()
    job.advance_to(started + 1000)
    job.set_suspend(True)
    assert job.progress() == (600.0, None)
    job.delete()
    assert job.progress() == (0.0, None)
    second = job.create(duration=3600, checkpoint=600)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    started = job.wait_running()
    assert job.progress() == (0.0, started)
    job.advance_to(started + 3600 - 1)
    assert not job.done()
    sim.advance(1)
    assert job.done()


def test_a_job_recreated_before_the_work_clock_looks_starts_from_zero(sim, custom):
    """The old object's kept work is tied to its uid, not to the name."""
    job = Driver(sim, custom, TFJOB)
    job.create(duration=3600, checkpoint=600)
    started = job.wait_running()
    job.advance_to(started + 1000)
    job.set_suspend(True)
    k = job.kind
    custom.delete_namespaced_custom_object(k.group, k.version, NS, k.plural, job.name)
    job.create(duration=3600, checkpoint=600)  # no settle in between
    sim.settle()
    started = job.wait_running()
    assert job.progress() == (0.0, started)


def test_an_uninterrupted_job_runs_its_duration(sim, custom):
    job = Driver(sim, custom, TFJOB)
    job.create(duration=3600, checkpoint=600)
    started = job.wait_running()
    job.advance_to(started + 3600 - 1)
    assert not job.done()
    sim.advance(1)
    assert job.done() and job.progress() == (0.0, None)


@pytest.mark.parametrize("checkpoint", ["0", "not-a-number"])
def test_checkpoint_zero_keeps_nothing_and_a_bad_value_means_the_default(sim, custom, checkpoint):
    job = Driver(sim, custom, TFJOB)
    manifest = TFJOB.manifest("j", duration=5000)
    manifest["metadata"]["annotations"]["kubesim.io/checkpoint-seconds"] = checkpoint
    custom.create_namespaced_custom_object(TFJOB.group, TFJOB.version, NS, TFJOB.plural, manifest)
    started = job.wait_running()
    job.advance_to(started + 2000)
    job.set_suspend(True)
    assert job.progress() == ((0.0 if checkpoint == "0" else 1800.0), None)


def test_the_default_checkpoint_comes_from_the_config():
    cluster = Cluster({"workload": {"default_checkpoint_seconds": 300}})
    assert cluster.work.default_checkpoint == 300.0
    assert Cluster({}).work.default_checkpoint == 1800.0
