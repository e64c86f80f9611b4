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
