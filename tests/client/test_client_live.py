"""jobdash_client against a live jobdash server (and, for wait(), a live dispatcher and kubesim)."""

import re
from pathlib import Path

import pytest

from jobdash.jobs.models import Job, Namespace
from jobdash_client import Client, JobdashError, Unreachable, WaitTimeout
from kubesim.testing import running_kubesim
from tests.client.support import give_a_late_estimate, running_dispatcher
from tests.jobdash.dispatch_support import cluster_config, manifest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(member):
    url, token = member
    return Client(url, token, timeout=10)


def test_submit_a_path_text_or_dict(client):
    from_path = client.submit(EXAMPLES / "mnist-cpu.yaml")
    assert (from_path.state, from_path.priority, from_path.demand) == (
        "Queued",
        0,
        {"cpu": "2", "memory": "4Gi", "pods": 1},
    )
    from_text = client.submit(manifest("from-text"))
    import yaml

    from_dict = client.submit(yaml.safe_load(manifest("from-dict")), namespace="team-a")
    assert {j.name for j in client.jobs(namespace="team-a")} == {"mnist-cpu", "from-text", "from-dict"}
    assert [j.name for j in client.jobs(name="from-text")] == ["from-text"]
    assert {j.name for j in client.jobs(name_contains="FROM-")} == {"from-text", "from-dict"}
    assert client.get(from_text.id).raw["manifest"] == manifest("from-text")
    assert from_dict.namespace == "team-a"
    assert [e["type"] for e in client.events(from_path.id)] == ["Submitted"]


def test_errors_carry_the_servers_field_paths(client):
    with pytest.raises(JobdashError) as error:
        client.submit(manifest("Bad_Name"))
    assert error.value.status == 400
    assert [e.path for e in error.value.errors] == ["metadata.name"]
    with pytest.raises(JobdashError) as forbidden:
        client.submit(manifest("x", namespace="secret"))
    assert forbidden.value.status == 403
    with pytest.raises(JobdashError) as missing:
        client.get(999999)
    assert missing.value.status == 404


def test_submit_many_queues_all_in_one_request_or_none(client, tmp_path):
    import yaml

    (tmp_path / "from-file.yaml").write_text(manifest("from-file"))
    given = [
        tmp_path / "from-file.yaml",
        manifest("from-text"),
        yaml.safe_load(manifest("from-dict", namespace="team-b")),
    ]
    jobs = client.submit_many(given)
    assert [(j.name, j.namespace, j.state) for j in jobs] == [
        ("from-file", "team-a", "Queued"),
        ("from-text", "team-a", "Queued"),
        ("from-dict", "team-b", "Queued"),
    ]
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)  # stored in order
    assert client.get(jobs[1].id).raw["manifest"] == manifest("from-text")

    with pytest.raises(JobdashError) as refused:
        client.submit_many([manifest("good-1"), manifest("good-2"), manifest("Bad_Name")])
    assert refused.value.status == 400
    assert [e.path for e in refused.value.errors] == ["[2].metadata.name"]
    with pytest.raises(JobdashError) as forbidden:
        client.submit_many([manifest("good-3"), manifest("x", namespace="secret")])
    assert forbidden.value.status == 403 and [e.path for e in forbidden.value.errors] == ["[1]"]
    assert Job.objects.count() == 3  # none of the refused requests' good jobs


def test_filters_queue_and_cancel(client):
    jobs = [client.submit(manifest(f"q-{i}")) for i in range(3)]
    for position, job in zip((2, 1, 3), jobs, strict=False):
        Job.objects.filter(pk=job.id).update(position=position)
    assert [j.name for j in client.queue("team-a")] == ["q-1", "q-0", "q-2"]
    cancelled = client.cancel(jobs[0].id)
    assert cancelled.state == "Cancelled" and cancelled.finished
    assert [j.name for j in client.jobs(state="Cancelled")] == ["q-0"]
    with pytest.raises(JobdashError) as again:
        client.cancel(jobs[0].id)
    assert again.value.status == 409


def test_wait_follows_a_job_until_it_finishes(client):
    with running_dispatcher():
        job = client.submit(manifest("watched", workers=2, duration=1))
        lines = []
        running = client.wait(job.id, until="Running", timeout=20, poll=0.1, progress=lines.append)
        assert running.state in ("Running", "Succeeded")
        done = client.wait(job.id, until="Succeeded", timeout=20, poll=0.1, progress=lines.append)
        assert done.state == "Succeeded"
        assert any("Running" in line for line in lines) and lines[-1].endswith("Succeeded")


def test_wait_for_a_final_state_returns_the_job_however_it_ended(client):
    job = client.submit(manifest("given-up"))
    client.cancel(job.id)
    ended = client.wait(job.id, until="Succeeded", timeout=5, poll=0.1, progress=lambda line: None)
    assert ended.state == "Cancelled"  # it will never succeed: the caller checks the state
    with pytest.raises(ValueError, match="until must be one of Released, Running, Succeeded"):
        client.wait(job.id, until="Done")


def test_a_server_that_does_not_answer_is_one_jobdash_error(client, live_server):
    down = Client("http://127.0.0.1:1", "token", timeout=5)
    with pytest.raises(Unreachable) as refused:
        down.jobs()
    assert isinstance(refused.value, JobdashError) and refused.value.status == 0
    assert str(refused.value) == "cannot reach http://127.0.0.1:1: connection refused (is jobdash running there?)"
    # TLS asked of a server that speaks plain HTTP: one sentence, no urllib3 chain.
    plain = live_server.url.replace("http://", "https://")
    with pytest.raises(Unreachable) as mismatch:
        Client(plain, "token", timeout=5).get(1)
    assert (
        str(mismatch.value) == f"cannot reach {plain}: it does not speak TLS there (is the URL http://, not https://?)"
    )
    # An HTTPS server (kubesim's, self-signed) asked with https:// and with http://.
    with running_kubesim({"tls": True, "namespaces": [{"name": "team-a"}]}) as tls:
        with pytest.raises(Unreachable) as untrusted:
            Client(tls.url, "token", timeout=5).get(1)
        assert str(untrusted.value) == (
            f"cannot reach {tls.url}: its TLS certificate is not trusted here (self-signed, or another host's name?)"
        )
        plainly = tls.url.replace("https://", "http://")
        with pytest.raises(Unreachable) as asked_plainly:
            Client(plainly, "token", timeout=5).get(1)
        assert str(asked_plainly.value) == (
            f"cannot reach {plainly}: it closed the connection without answering (an https:// server asked with http://?)"
        )


def test_wait_times_out_with_the_job_attached(client):
    job = client.submit(manifest("never-released"))  # no dispatcher runs here
    with pytest.raises(WaitTimeout) as timeout:
        client.wait(job.id, until="Running", timeout=0.3, poll=0.1, progress=lambda line: None)
    assert timeout.value.job.state == "Queued"


def test_the_readme_shows_what_describe_prints_for_a_job_just_submitted(client, settings):
    """The README's notebook lines, as written: the job it submits, described at once (no
    cycle has ranked it yet: no dispatcher runs here), prints what its comment says."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    submitted = re.search(r'^job = client\.submit\("(examples/[^"]+)", priority_class="(\w+)"\)$', readme, re.M)
    said = re.search(r"^print\(job\.describe\(\)\)  # (.+)$", readme, re.M)
    assert submitted and said
    chosen = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": submitted[2]}}
    with running_kubesim(cluster_config(objects=[{**chosen, "value": 1000}]), manual_clock=True) as sim:
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        job = client.submit(EXAMPLES.parent / submitted[1], priority_class=submitted[2])
    assert job.describe() == said[1]


def test_describe_says_why_a_job_failed():
    from jobdash_client import Job as ClientJob

    base = {"id": 1, "namespace": "team-a", "name": "x", "kind": "PyTorchJob", "priority": 0}
    failed = ClientJob.from_json({**base, "state": "Failed", "message": "the PyTorchJob failed: OOMKilled"})
    assert failed.describe() == "PyTorchJob team-a/x Failed: the PyTorchJob failed: OOMKilled"
    done = ClientJob.from_json({**base, "state": "Succeeded", "message": ""})
    assert done.describe() == "PyTorchJob team-a/x Succeeded"


def test_describe_gives_a_queued_jobs_start_range():
    from jobdash_client import Job as ClientJob

    base = {"id": 1, "namespace": "team-a", "name": "x", "kind": "TFJob", "priority": 0, "state": "Queued"}
    queued = {**base, "position": 2, "reason": "QuotaExceeded", "message": "quota requests.cpu"}
    ranged = ClientJob.from_json({**queued, "eta": "2026-11-24T14:20:00Z", "eta_late": "2026-11-24T15:05:30.5Z"})
    assert ranged.describe() == (
        "TFJob team-a/x Queued #2, likely start 2026-11-24 14:20 UTC, by 15:05 UTC at the latest (90 %): "
        "QuotaExceeded — quota requests.cpu"
    )
    overnight = ClientJob.from_json({**queued, "eta": "2026-11-24T23:40:00+00:00", "eta_late": "2026-11-25T01:00:00Z"})
    assert "likely start 2026-11-24 23:40 UTC, by 2026-11-25 01:00 UTC at the latest (90 %)" in overnight.describe()
    likely_only = ClientJob.from_json({**queued, "eta": "2026-11-24T14:20:00Z", "eta_late": None})
    assert "likely start 2026-11-24 14:20 UTC:" in likely_only.describe()
    assert "latest" not in likely_only.describe()
    unknown = ClientJob.from_json({**base, "position": None, "eta": None})
    assert unknown.describe() == "TFJob team-a/x Queued not yet placed"
    # An older server without the new fields still reads.
    assert (unknown.eta_late, unknown.predicted_duration_s, unknown.prediction_source, unknown.past_late_bound) == (
        None,
        None,
        "",
        False,
    )


def test_the_start_range_and_prediction_through_the_client(client):
    from datetime import UTC, datetime, timedelta

    job = client.submit(manifest("estimated"))
    now = datetime.now(UTC)
    likely = (now + timedelta(hours=1)).replace(second=0, microsecond=0)
    late = likely + timedelta(minutes=45)
    Job.objects.filter(pk=job.id).update(position=1)
    give_a_late_estimate(job.id, likely, late)
    got = client.get(job.id)
    assert (got.eta, got.eta_late) == (f"{likely:%Y-%m-%dT%H:%M:%S}Z", f"{late:%Y-%m-%dT%H:%M:%S}Z")
    assert (got.predicted_duration_s, got.predicted_p90_s, got.prediction_source) == (2520.0, 7560.0, "user+name")
    assert got.past_late_bound is True  # still queued after its first late bound
    day = "" if late.date() == likely.date() else f"{late:%Y-%m-%d} "
    assert (
        f"#1, likely start {likely:%Y-%m-%d %H:%M} UTC, by {day}{late:%H:%M} UTC at the latest (90 %)" in got.describe()
    )
    assert [j.past_late_bound for j in client.queue("team-a")] == [True]


def test_priority_classes_through_the_client(client, settings):
    classes = {"low": 100, "normal": 1000, "urgent": 100000}
    objects = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in classes.items()
    ]
    Namespace.objects.filter(name="team-a").update(max_priority_class="normal")
    with running_kubesim(cluster_config(objects=objects), manual_clock=True) as sim:
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        job = client.submit(manifest("classy"), priority_class="low")
        assert (job.priority, job.priority_class) == (100, "low")
        job = client.set_priority_class(job.id, "normal")
        assert (job.priority, job.priority_class) == (1000, "normal")
        with pytest.raises(JobdashError) as refused:
            client.set_priority_class(job.id, "urgent")
        assert refused.value.status == 403 and [e.path for e in refused.value.errors] == ["priority_class"]
        with pytest.raises(JobdashError) as not_staff:
            client.requeue(job.id)
        assert not_staff.value.status == 403
