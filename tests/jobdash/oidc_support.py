"""The test OpenID Connect provider and a browser that signs in through it, shared by the
sign-in tests (test_oidc_signin.py) and the one-identity end-to-end test: panva's certified
`oidc-provider` (npm, installed by `make install` under tests/oidc_provider/) run as a
subprocess with its development login and consent pages; the browser is a requests session
that follows the provider's forms."""

import contextlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import requests
from joserfc.jwk import RSAKey

PROVIDER = Path(__file__).resolve().parents[1] / "oidc_provider"
NODE = shutil.which("node")
CLIENT_ID, SECRET = "jobdash", "jobdash-test-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_provider(live_url: str, directory: Path, users: dict[str, dict]) -> Iterator[tuple[str, RSAKey]]:
    """The provider, with jobdash at `live_url` registered as its client and `users` (login ->
    email and groups) as its accounts; yields its issuer URL and the key it signs ID tokens
    with (the test's own, to mint expired ones)."""
    assert NODE is not None, "node is needed for the OIDC tests"
    assert (PROVIDER / "node_modules" / "oidc-provider").is_dir(), "run `make install` (npm ci in tests/oidc_provider)"
    key = RSAKey.generate_key(2048, parameters={"kid": "test-key", "use": "sig", "alg": "RS256"})
    issuer = f"http://127.0.0.1:{free_port()}"
    config = {
        "issuer": issuer,
        "signing_key": key.as_dict(private=True),
        "users": users,
        "clients": [
            {
                "client_id": CLIENT_ID,
                "client_secret": SECRET,
                "redirect_uris": [f"{live_url}/login/oidc/callback/"],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
            }
        ],
    }
    path = directory / "provider.json"
    path.write_text(json.dumps(config))
    log = directory / "provider.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [NODE, str(PROVIDER / "provider.mjs"), str(path)],
            cwd=PROVIDER,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 30
        while "listening" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield issuer, key
    finally:
        process.terminate()
        process.wait(timeout=10)


def configure(settings, issuer: str) -> None:
    """jobdash's OIDC settings for the provider: usernames from the email claim under the
    `oidc:` prefix, as kube-apiserver's --oidc-username-claim/-prefix would map them."""
    settings.JOBDASH_OIDC_ISSUER = issuer
    settings.JOBDASH_OIDC_CLIENT_ID = CLIENT_ID
    settings.JOBDASH_OIDC_CLIENT_SECRET = SECRET
    settings.JOBDASH_OIDC_SCOPES = "openid email groups"
    settings.JOBDASH_OIDC_PROVIDER_NAME = "Dex"
    settings.JOBDASH_OIDC_USERNAME_CLAIM = "email"
    settings.JOBDASH_OIDC_USERNAME_PREFIX = "oidc:"
    settings.JOBDASH_OIDC_LEEWAY_SECONDS = 0


class Forms(HTMLParser):
    """The forms of a page: action, method and the inputs' names and values."""

    def __init__(self):
        super().__init__()
        self.forms: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "method": a.get("method", "get"), "fields": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["fields"][a["name"]] = a.get("value") or ""


def forms_of(response: requests.Response) -> list[dict]:
    parser = Forms()
    parser.feed(response.text)
    return parser.forms


def only_form(response: requests.Response) -> dict:
    forms = forms_of(response)
    assert len(forms) == 1, response.text
    return forms[0]


def to_callback(
    browser: requests.Session, live_url: str, login: str = "alice", next_url: str = "/account/token/"
) -> str:
    """Start the sign-in at jobdash and go through the provider's login and consent pages;
    returns the URL the provider sends the browser back to (jobdash's callback), unvisited."""
    start = browser.get(f"{live_url}/login/oidc/?next={next_url}", allow_redirects=False)
    assert start.status_code == 302, start.text
    authorize = parse_qs(urlsplit(start.headers["Location"]).query)
    assert authorize["code_challenge_method"] == ["S256"] and authorize["code_challenge"][0]
    assert authorize["client_id"] == [CLIENT_ID] and "state" in authorize and "nonce" in authorize
    response = browser.get(start.headers["Location"])
    for _ in range(4):  # login, then consent
        form = only_form(response)
        fields = {**form["fields"], "login": login, "password": "any"} if "login" in response.text else form["fields"]
        response = browser.post(
            requests.compat.urljoin(response.url, form["action"]), data=fields, allow_redirects=False
        )
        while response.is_redirect:
            location = requests.compat.urljoin(response.url, response.headers["Location"])
            if location.startswith(live_url):
                return location
            response = browser.get(location, allow_redirects=False)
    raise AssertionError("the provider never sent the browser back")
