import pytest
from django.contrib.auth.models import Group, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.models import Namespace
from kubesim.testing import running_kubesim
from tests.consul_server import ConsulTestServer

from .dispatch_support import cluster_config


@pytest.fixture
def consul_server():
    """A server with Consul's HTTP semantics for sessions and KV locks (tests/consul_server.py)."""
    with ConsulTestServer() as server:
        yield server


@pytest.fixture
def team_a(db):
    return Namespace.objects.create(name="team-a")


@pytest.fixture
def team_b(db):
    return Namespace.objects.create(name="team-b")


@pytest.fixture
def alice(db, team_a):
    """A member of team-a only."""
    user = User.objects.create_user("alice", password="alice-pass-123")
    team_a.members.add(user)
    return user


@pytest.fixture
def bob(db, team_b):
    """A member of team-b through a group."""
    user = User.objects.create_user("bob", password="bob-pass-123")
    group = Group.objects.create(name="vision")
    user.groups.add(group)
    team_b.groups.add(group)
    return user


@pytest.fixture
def staff(db):
    return User.objects.create_user("root", password="root-pass-123", is_staff=True, is_superuser=True)


def token_client(user) -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def api(alice):
    return token_client(alice)


@pytest.fixture
def staff_api(staff, team_a, team_b):
    return token_client(staff)


def with_name(text: str, name: str) -> str:
    """An example manifest under another metadata.name."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("  name: "):
            lines[i] = f"  name: {name}\n"
            return "".join(lines)
    raise AssertionError("example has no metadata.name line")


# The dispatcher tests' world: a member of both namespaces, kubesim on a manual clock, a
# started gateway and the leader's term.
@pytest.fixture
def user(db):
    user = User.objects.create_user("ana")
    for name in ("team-a", "team-b"):
        Namespace.objects.get_or_create(name=name)[0].members.add(user)
    return user


@pytest.fixture
def sim():
    with running_kubesim(cluster_config(), manual_clock=True) as sim:
        yield sim


@pytest.fixture
def term(db):
    transitions.take_term(1, "test")
    return 1


# The console's world: a logged-in operator and three queued jobs of alice's (a-0, a-1, a-2).
@pytest.fixture
def admin_client(client, staff, team_a, team_b):
    client.force_login(staff)
    return client


@pytest.fixture
def jobs(alice, example_text):
    return [
        services.job_submit(user=alice, manifest=with_name(example_text("mnist-cpu"), f"a-{i}"), source="api")
        for i in range(3)
    ]
