"""Shared set-up for the dispatcher tests: kubesim over HTTP, the real gateway, helpers."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from jobdash.cluster.kube import KubeGateway, api_client
from jobdash.dispatch.cycle import DispatchSettings
from jobdash.jobs.models import Job
from tests.waiting import eventually

JOBDASH = "system:serviceaccount:jobdash:jobdash"


def tf(namespace: str, name: str) -> tuple[str, str, str]:
    """The gateway's key of a TFJob."""
    return ("tfjobs.kubeflow.org", namespace, name)


def cluster_config(quota_cpu: str = "6", nodes: int = 2, node_cpu: str = "16", **extra) -> dict:
    return {
        "nodes": [{"prefix": "node", "count": nodes, "capacity": {"cpu": node_cpu, "memory": "64Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": quota_cpu}}, {"name": "team-b"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
        **extra,
    }


def settings(**overrides) -> DispatchSettings:
    values = dict(
        policy="priority",
        release_mode="create",
        node_fit=True,
        start_timeout_s=300.0,
        max_attempts=3,
        backoff_s=0.0,
        concurrency=8,
        # the queue in the cluster kept up to date every cycle (the budget's own tests lower it)
        publish_qps=10_000.0,
        publish_burst=10_000,
        publish_share=1.0,
    )
    values.update(overrides)
    return DispatchSettings(**values)


def start_gateway(sim) -> KubeGateway:
    gateway = KubeGateway(api_client("kubeconfig", sim.kubeconfig_path), retries=1, backoff=0.01)
    gateway.start(timeout=10)
    return gateway


def manifest(
    name: str, workers: int = 1, cpu: str = "1", duration: int = 10, namespace: str = "team-a", checkpoint: int = 1800
) -> str:
    """A TFJob that runs `duration` seconds in kubesim, keeping its work every `checkpoint` seconds."""
    return f"""apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: {name}
  namespace: {namespace}
  annotations:
    kubesim.io/duration-seconds: "{duration}"
    kubesim.io/checkpoint-seconds: "{checkpoint}"
spec:
  tfReplicaSpecs:
    Worker:
      replicas: {workers}
      template:
        spec:
          containers:
            - name: tensorflow
              image: tf:2
              resources:
                requests: {{cpu: "{cpu}", memory: 1Gi}}
"""


@dataclass
class ManualClock:
    """The dispatcher's clock in a test (jobdash.dispatch.state.clock.Clock): it moves only when
    told, beside kubesim's manual clock, so a grace period or a late bound passes without
    the test sleeping."""

    at: datetime = field(default_factory=timezone.now)

    def now(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def pods_seen(sim, gateway, namespaces=("team-a", "team-b")) -> bool:
    """Whether the watch cache shows every pod kubesim has, in its phase and deletion state."""
    want = {
        (pod["metadata"]["namespace"], pod["metadata"]["name"]): (
            pod.get("status", {}).get("phase"),
            bool(pod["metadata"].get("deletionTimestamp")),
        )
        for namespace in namespaces
        for pod in sim.cluster.pods(namespace)
    }
    seen = {(pod.namespace, pod.name): (pod.phase, pod.deleting) for pod in gateway.pods()}
    return seen == want


def advance(sim, gateway, clock: ManualClock | None, seconds: float) -> None:
    """Cluster and dispatcher time move on together; the watch cache catches up."""
    if clock is not None:
        clock.advance(seconds)
    sim.advance(seconds)
    eventually(lambda: pods_seen(sim, gateway), timeout=3, message="the watch cache never caught up")


def step(dispatcher, sim, seconds: float = 1.0, namespaces=("team-a", "other")) -> None:
    """The dispatcher's clock and kubesim's move on together; the watch cache catches up."""
    dispatcher.clock.advance(seconds)
    sim.advance(seconds)
    eventually(lambda: pods_seen(sim, dispatcher.gateway, namespaces), timeout=5)


def cycle_until(dispatcher, sim, term, wanted, *, seconds: float = 1.0, steps: int = 60) -> None:
    """Cycles, each followed by `seconds` of both clocks, until `wanted()`; else every job's state."""
    for _ in range(steps):
        dispatcher.cycle(term)
        if wanted():
            return
        step(dispatcher, sim, seconds)
    raise AssertionError(list(Job.objects.values("name", "state", "reason", "scale", "message")))


def state(job: Job) -> str:
    return Job.objects.get(pk=job.pk).state


def run_until(dispatcher, sim, gateway, job: Job, wanted: str, term: int = 1, steps: int = 40) -> None:
    """Alternate cycles and virtual time until the job reaches `wanted`."""
    for _ in range(steps):
        dispatcher.cycle(term)
        if state(job) == wanted:
            return
        sim.advance(1.0)
        # the watch cache sees what kubesim did (a cycle that saw no change plans nothing)
        eventually(lambda: pods_seen(sim, gateway), timeout=3, message="the watch cache never caught up")
    raise AssertionError(f"job {job.name} is {state(job)}, never {wanted}")


def create_namesake(sim, name: str, namespace: str = "team-a") -> None:
    """A TFJob jobdash did not create, under a queued job's name: its release is refused."""
    sim.cluster.create_tfjob(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "tfReplicaSpecs": {
                    "Worker": {
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"name": "tensorflow", "image": "x"}]}},
                    }
                }
            },
        }
    )
