from pathlib import Path

import pytest
from django.conf import settings as django_settings
from hypothesis import settings

from tests.examples import PROFILE
from tests.jobdash.dispatch_support import start_gateway

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def example_text():
    def read(name: str) -> str:
        return (EXAMPLES / f"{name}.yaml").read_text()

    return read


@pytest.fixture
def cycling(db, settings):  # (pytest-django's settings fixture, not hypothesis')
    """A dispatcher that leads (term 1) and has just completed a cycle, for a test that writes
    what a plan says (a reason, a position) itself: without one, pages and the API say that
    jobs are not being released (jobs/dispatcher_health.py). Ticks of ten minutes keep that
    cycle recent for the whole test."""
    from django.utils import timezone

    from jobdash.dispatch.writers import transitions
    from jobdash.jobs.models import Cycle

    settings.JOBDASH_TICK_SECONDS = 600.0
    transitions.take_term(1, "test")
    Cycle.objects.create(
        started_at=timezone.now(), duration_ms=1.0, term=1, policy="priority", pending=0, admitted=0, released=0
    )


@pytest.fixture(scope="session")
def webhook_pki(tmp_path_factory):
    from tests.pki import make_webhook_pki

    return make_webhook_pki(tmp_path_factory.mktemp("webhook-pki"))


@pytest.fixture
def webhook_listener(transactional_db, webhook_pki):
    """jobdash's webhook on its own TLS listener, which only a caller with the API server's
    client certificate gets through (kubesim configured by tests.pki.with_webhook)."""
    from webhooks.listener import WebhookListener

    with WebhookListener(**webhook_pki.listener_files()) as listener:
        yield listener


# Hypothesis profiles (tests/examples.py): `ci` is Hypothesis' defaults; `dev` fewer examples.
settings.register_profile("ci", settings.get_profile("default"))
settings.register_profile("dev", max_examples=10)
settings.load_profile(PROFILE)


# Test users' passwords hashed once, cheaply: PBKDF2's million rounds cost most of the set-up
# of every test that creates a user with a password (login, admin, API tokens).
django_settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def gateway(sim):
    """jobdash's real gateway to the module's kubesim (its `sim` fixture), its watches
    started; stopped after the test."""
    gateway = start_gateway(sim)
    yield gateway
    gateway.stop()
