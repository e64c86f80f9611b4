"""Roles from the cluster's RBAC (jobdash/jobs/roles.py), judged through every door: the REST
API, the pages and the admin console, against kubesim with RBAC on and the real gateway as
jobdash's identity (deploy's ClusterRole), JOBDASH_ROLES_FROM=rbac and no admin-console
membership at all. Each person's role in team-a is a RoleBinding to the default ClusterRole
of that name; the outsider has none; staff are staff."""

import time

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from jobdash.cluster import access
from jobdash.embedded.rbac import deploy_objects
from jobdash.jobs import roles, services
from jobdash.jobs.models import Job, Namespace, Source, State
from kubesim.resources import ROLEBINDINGS, ROLES
from kubesim.testing import running_kubesim
from tests.waiting import eventually

from .conftest import with_name
from .dispatch_support import JOBDASH

RBAC = "rbac.authorization.k8s.io"
PEOPLE = {"outsider": "", "viewer": "view", "editor": "edit", "nsadmin": "admin"}
ACTIONS = (
    "view queue",
    "view job",
    "submit",
    "cancel own",
    "cancel other's",
    "reprioritise own",
    "reprioritise other's",
    "admin console",
)
OWNED = ("own", "other", "own-p", "other-p")
# status per action; the same table for the pages below where a page offers the action
# (an outsider still sees a job of its own, one made with kubectl say, and acts on it only
# with the edit role)
API = {
    "outsider": (404, 200, 403, 403, 404, 403, 404, 302),
    "viewer": (200, 200, 403, 403, 403, 403, 403, 302),
    "editor": (200, 200, 201, 200, 403, 200, 403, 302),
    "nsadmin": (200, 200, 201, 200, 200, 200, 200, 302),
    "staff": (200, 200, 201, 200, 200, 200, 200, 200),
}
# the pages: a queued job is a redirect to it (302), a refused submission the form again
# (200); the priority form is staff's (numeric), so reprioritising is the API's
PAGES = {
    "outsider": (404, 200, 200, 403, 404, None, None, 302),
    "viewer": (200, 200, 200, 403, 403, None, None, 302),
    "editor": (200, 200, 302, 302, 403, None, None, 302),
    "nsadmin": (200, 200, 302, 302, 302, None, None, 302),
    "staff": (200, 200, 302, 302, 302, None, None, 200),
}


def binding(user: str, role: str, namespace: str = "team-a") -> dict:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{user}-{role}", "namespace": namespace},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
    }


@pytest.fixture(scope="module")
def sim():
    config = {
        "rbac": True,
        "namespaces": [{"name": "team-a"}, {"name": "team-b"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "objects": [
            *deploy_objects(),
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 1},
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 9},
            *(binding(user, role) for user, role in PEOPLE.items() if role),
        ],
    }
    with running_kubesim(config) as running:
        yield running


@pytest.fixture
def rbac_roles(sim, settings):
    settings.JOBDASH_ROLES_FROM = "rbac"
    settings.JOBDASH_CLUSTER = "kubeconfig"
    settings.KUBECONFIG = sim.kubeconfig_path
    settings.JOBDASH_ROLES_CACHE_SECONDS = 60.0  # long: only the binding watch can make a change count soon
    yield access.from_settings()
    access.from_settings().stop()


@pytest.fixture
def people(db, rbac_roles):
    Namespace.objects.create(name="team-a")
    Namespace.objects.create(name="team-b")
    found = {name: User.objects.create_user(name, password="pass-123-roles") for name in PEOPLE}
    found["staff"] = User.objects.create_user("root", password="pass-123-roles", is_staff=True, is_superuser=True)
    return found


def job_of(owner: User, example_text, name: str) -> Job:
    """A Queued job in team-a that `owner` submitted (stored by staff's hand: the outsider
    and the viewer may not submit now, but may have when they could)."""
    job = services.job_submit(user=None, manifest=with_name(example_text("mnist-cpu"), name), source=Source.API)
    Job.objects.filter(pk=job.pk).update(submitted_by=owner, submitted_by_name=owner.username)
    return Job.objects.get(pk=job.pk)


def api_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def api_statuses(client: APIClient, jobs: dict[str, Job], manifest: str) -> tuple[int, ...]:
    high = {"priority_class": "high"}
    return (
        client.get("/api/v1/namespaces/team-a/queue/").status_code,
        client.get(f"/api/v1/jobs/{jobs['own'].pk}/").status_code,
        client.post("/api/v1/jobs/", manifest, content_type="application/yaml").status_code,
        client.post(f"/api/v1/jobs/{jobs['own'].pk}/cancel/").status_code,
        client.post(f"/api/v1/jobs/{jobs['other'].pk}/cancel/").status_code,
        client.post(f"/api/v1/jobs/{jobs['own-p'].pk}/priority_class/", high, format="json").status_code,
        client.post(f"/api/v1/jobs/{jobs['other-p'].pk}/priority_class/", high, format="json").status_code,
        client.get(f"/admin/jobs/job/{jobs['other'].pk}/change/").status_code,
    )


@pytest.mark.django_db
@pytest.mark.parametrize("who", list(API))
def test_each_role_may_do_what_its_row_says_through_the_api(people, who, example_text):
    user, someone = people[who], people["editor" if who != "editor" else "nsadmin"]
    # reprioritising needs a job still Queued: a pair of its own beside the pair cancelled
    jobs = {name: job_of(user if name.startswith("own") else someone, example_text, name) for name in OWNED}
    client = api_client(user)
    if who == "staff":
        client.force_login(user)  # the admin console is a session's
    else:
        client.login(username=user.username, password="pass-123-roles")
    got = api_statuses(client, jobs, with_name(example_text("mnist-cpu"), "new"))
    assert dict(zip(ACTIONS, got, strict=True)) == dict(zip(ACTIONS, API[who], strict=True))
    cancelled = set(Job.objects.filter(state=State.CANCELLED).values_list("name", flat=True))
    assert cancelled == {name for name, status in (("own", got[3]), ("other", got[4])) if status == 200}
    high = set(Job.objects.filter(priority_class="high").values_list("name", flat=True))
    assert high == {name for name, status in (("own-p", got[5]), ("other-p", got[6])) if status == 200}


@pytest.mark.django_db
def test_a_refusal_names_the_role_it_needs_and_what_granted_the_one_there_is(people, example_text):
    other = job_of(people["nsadmin"], example_text, "admins")
    refused = api_client(people["editor"]).post(f"/api/v1/jobs/{other.pk}/cancel/")
    assert refused.status_code == 403
    message = refused.json()["errors"][0]["message"]
    assert "needs the admin role in namespace 'team-a'" in message and "submitted by nsadmin" in message
    assert 'RoleBinding "editor-edit/team-a" of ClusterRole "edit" to User "editor"' in message
    assert Job.objects.get(pk=other.pk).state == State.QUEUED
    manifest = with_name(example_text("mnist-cpu"), "viewed")
    viewer = api_client(people["viewer"]).post("/api/v1/jobs/", manifest, content_type="application/yaml")
    assert viewer.status_code == 403 and "needs the edit role" in viewer.json()["errors"][0]["message"]
    assert 'ClusterRole "view"' in viewer.json()["errors"][0]["message"]
    outsider = api_client(people["outsider"]).post("/api/v1/jobs/", manifest, content_type="application/yaml")
    assert outsider.json()["errors"][0]["message"] == "you are not a member of namespace 'team-a'"


@pytest.mark.django_db
@pytest.mark.parametrize("who", list(PAGES))
def test_each_role_may_do_what_its_row_says_through_the_pages(people, who, example_text):
    user, someone = people[who], people["editor" if who != "editor" else "nsadmin"]
    own, other = job_of(user, example_text, "own"), job_of(someone, example_text, "other")
    client = Client()
    client.force_login(user)
    submit = {"manifest": with_name(example_text("mnist-cpu"), "new"), "namespace": "team-a", "priority_class": ""}
    got = (
        client.get("/ns/team-a/").status_code,
        client.get(f"/jobs/{own.pk}/").status_code,
        client.post("/submit/", submit).status_code,
        client.post(f"/jobs/{own.pk}/cancel/", {"reason": "done"}).status_code,
        client.post(f"/jobs/{other.pk}/cancel/", {"reason": "done"}).status_code,
        None,
        None,
        client.get(f"/admin/jobs/job/{other.pk}/change/").status_code,
    )
    assert dict(zip(ACTIONS, got, strict=True)) == dict(zip(ACTIONS, PAGES[who], strict=True))
    assert Job.objects.filter(name="new").exists() == (got[2] == 302)
    if got[0] == 200:  # the namespace page says which role, and what granted it
        page = client.get("/ns/team-a/").content.decode()
        role = roles.grant(user, Namespace.objects.get(name="team-a"))
        assert f"Your role here: <strong>{role.role}</strong>" in page
        assert ("staff" if who == "staff" else f"RoleBinding &quot;{user.username}-{role.role}/team-a&quot;") in page


@pytest.mark.django_db
def test_a_rolebinding_added_gives_edit_within_seconds_and_removed_takes_it_away(sim, people, example_text):
    outsider, team_a = people["outsider"], Namespace.objects.get(name="team-a")
    manifest = with_name(example_text("mnist-cpu"), "late")
    client = api_client(outsider)
    assert client.post("/api/v1/jobs/", manifest, content_type="application/yaml").status_code == 403
    assert roles.grant(outsider, team_a).role == ""  # cached for a minute (the fixture's TTL)
    sim.cluster.api.create(ROLEBINDINGS, "team-a", binding("outsider", "edit"))
    eventually(lambda: roles.grant(outsider, team_a).role == "edit", 5, "the new RoleBinding never counted")
    assert client.post("/api/v1/jobs/", manifest, content_type="application/yaml").status_code == 201
    sim.cluster.api.delete(ROLEBINDINGS, "team-a", "outsider-edit")
    eventually(lambda: roles.grant(outsider, team_a).role == "", 5, "the removed RoleBinding still counted")
    assert client.get("/api/v1/namespaces/team-a/queue/").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("source", ["membership", "both"])
def test_a_member_edits_only_their_own_jobs_and_the_source_is_named(settings, sim, source, example_text):
    """Without RBAC (or beside it) the admin console's members edit: one member can no
    longer cancel or reprioritise another's job (issue 33's alice and admin); with `both`,
    the cluster's admin role still counts for a member."""
    settings.JOBDASH_ROLES_FROM = source
    settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
    team_a = Namespace.objects.create(name="team-a")
    alice, carol = User.objects.create_user("alice"), User.objects.create_user("nsadmin")
    team_a.members.add(alice, carol)
    alices, carols = job_of(alice, example_text, "alices"), job_of(carol, example_text, "carols")
    assert str(roles.grant(alice, team_a)) == "edit (member (admin console))"
    client = api_client(alice)
    refused = client.post(f"/api/v1/jobs/{carols.pk}/cancel/")
    assert refused.status_code == 403 and "needs the admin role" in refused.json()["errors"][0]["message"]
    high = {"priority_class": "high"}
    assert client.post(f"/api/v1/jobs/{carols.pk}/priority_class/", high, format="json").status_code == 403
    assert client.post(f"/api/v1/jobs/{alices.pk}/cancel/").status_code == 200
    # nsadmin is bound to `admin` in team-a in the cluster: it counts only when RBAC is asked
    expected = 200 if source == "both" else 403
    assert api_client(carol).post(f"/api/v1/jobs/{carols.pk}/priority_class/", high, format="json").status_code == 200
    job = job_of(alice, example_text, "alices-2")
    assert api_client(carol).post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == expected
    assert Job.objects.get(pk=carols.pk).state == State.QUEUED
    access.from_settings().stop()


@pytest.mark.django_db
def test_the_console_says_what_its_members_grant(people, settings):
    client = Client()
    client.force_login(people["staff"])
    team_a = Namespace.objects.get(name="team-a")
    page = client.get(f"/admin/jobs/namespace/{team_a.pk}/change/").content.decode()
    assert "the members above grant nothing (JOBDASH_ROLES_FROM=rbac)" in page
    settings.JOBDASH_ROLES_FROM = "membership"
    page = client.get(f"/admin/jobs/namespace/{team_a.pk}/change/").content.decode()
    assert "the members above (and the groups&#x27; users) edit" in page


@pytest.mark.django_db
def test_a_roles_rules_changing_counts_once_the_answer_expires(sim, people, settings):
    """No watch covers a Role's rules: JOBDASH_ROLES_CACHE_SECONDS bounds how long an answer
    outlives them."""
    settings.JOBDASH_ROLES_CACHE_SECONDS = 0.5
    outsider, team_a = people["outsider"], Namespace.objects.get(name="team-a")
    role = {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": {"name": "custom", "namespace": "team-a"}}
    sim.cluster.api.create(ROLES, "team-a", {**role, "rules": []})
    bound = binding("outsider", "custom")
    bound["roleRef"]["kind"] = "Role"
    sim.cluster.api.create(ROLEBINDINGS, "team-a", bound)
    try:
        eventually(lambda: roles.grant(outsider, team_a).role == "", 5)
        rules = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]}]
        sim.cluster.api.replace(ROLES, "team-a", "custom", {**role, "rules": rules})
        eventually(lambda: roles.grant(outsider, team_a).role == "view", 5, "the Role's new rule never counted")
    finally:
        sim.cluster.api.delete(ROLEBINDINGS, "team-a", "outsider-custom")
        sim.cluster.api.delete(ROLES, "team-a", "custom")
        access.from_settings().stop()


@pytest.mark.django_db
def test_a_cluster_that_cannot_be_asked_grants_nothing_and_says_so_quickly(people, settings, tmp_path):
    closed = tmp_path / "closed.kubeconfig"
    closed.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    settings.KUBECONFIG = str(closed)
    for i in range(10):
        Namespace.objects.create(name=f"more-{i}")
    editor = people["editor"]
    started = time.monotonic()
    listed = api_client(editor).get("/api/v1/namespaces/")
    assert listed.status_code == 200 and listed.json()["results"] == []
    assert time.monotonic() - started < 5  # one failed review, then the pause: not twelve
    granted = roles.grant(editor, Namespace.objects.get(name="team-a"))
    assert granted.role == "" and "the cluster could not be asked" in granted.source
    access.from_settings().stop()
