"""The example notebook, cell by cell, against a live server, dispatcher and kubesim: what
it shows users must keep working."""

import contextlib
import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from jobdash.jobs.models import Job, Namespace
from tests.client.support import running_dispatcher

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.django_db(transaction=True)


def code_cells(path: Path) -> list[str]:
    notebook = json.loads(path.read_text())
    assert notebook["nbformat"] == 4
    return ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]


def test_the_example_notebook_runs_a_job_to_the_end(live_server, monkeypatch):
    user = User.objects.create_user("nb")
    Namespace.objects.create(name="team-a").members.add(user)
    monkeypatch.setenv("JOBDASH_URL", live_server.url)
    monkeypatch.setenv("JOBDASH_TOKEN", Token.objects.create(user=user).key)
    monkeypatch.chdir(EXAMPLES)  # the notebook opens its example by relative path
    printed, scope = io.StringIO(), {}
    with running_dispatcher():
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            for source in code_cells(EXAMPLES / "notebook.ipynb"):
                exec(compile(source, "notebook.ipynb", "exec"), scope)
    job = Job.objects.get(name="mnist-from-notebook")
    assert (job.state, job.priority, job.submitted_by) == ("Succeeded", 0, user)
    output = printed.getvalue()
    assert "team-a/mnist-from-notebook Queued" in output and "finished: Succeeded" in output
    assert '400 ["metadata.name: must be' in output, output  # the mistake names its field
    assert Job.objects.count() == 1  # the broken manifest wrote nothing
