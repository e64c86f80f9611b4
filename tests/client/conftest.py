import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from jobdash.jobs.models import Namespace

CLIENT = Path(__file__).resolve().parents[2] / "client"


@pytest.fixture
def member(live_server) -> tuple[str, str]:
    """(server URL, API token) of a member of team-a and team-b; `secret` exists, not theirs."""
    user = User.objects.create_user("member")
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name).members.add(user)
    Namespace.objects.create(name="secret")
    return live_server.url, Token.objects.create(user=user).key


@pytest.fixture
def server(member):
    return member


@pytest.fixture
def jobdash(server, tmp_path):
    """Run `jobdash ARGS` with JOBDASH_URL / JOBDASH_TOKEN set (env= replaces them), no config file."""
    url, token = server

    def run(*args, env=None, input=None, check=None, stdout=None):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("JOBDASH_")}
        given = {"JOBDASH_URL": url, "JOBDASH_TOKEN": token} if env is None else env
        clean.update({"HOME": str(tmp_path), "JOBDASH_CONFIG": str(tmp_path / "config.yaml"), **given})
        clean["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CLIENT), clean.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "jobdash_client.cli", *map(str, args)]
        streams = {"capture_output": True} if stdout is None else {"stdout": stdout, "stderr": subprocess.PIPE}
        done = subprocess.run(command, env=clean, input=input, text=True, timeout=60, **streams)
        assert "Traceback" not in done.stderr, done.stderr
        if check is not None:
            assert done.returncode == check, (done.returncode, done.stdout, done.stderr)
        return done

    return run
