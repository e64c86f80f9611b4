import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from jobdash.jobs.models import Namespace


@pytest.fixture
def member(live_server) -> tuple[str, str]:
    """(server URL, API token) of a member of team-a and team-b; `secret` exists, not theirs."""
    user = User.objects.create_user("member")
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name).members.add(user)
    Namespace.objects.create(name="secret")
    return live_server.url, Token.objects.create(user=user).key
