"""The `jobdash` command, run as a subprocess against a live jobdash server."""

import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from jobdash.jobs.models import Job, Namespace
from jobdash_client import Client
from kubesim.testing import running_kubesim
from tests.client.support import columns, give_a_late_estimate
from tests.jobdash.dispatch_support import cluster_config, manifest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLIENT = Path(__file__).resolve().parents[2] / "client"
pytestmark = pytest.mark.django_db(transaction=True)


def test_the_entry_point_is_installed():
    script = Path(sys.executable).parent / "jobdash"  # make test installs ./client into .venv
    assert script.exists(), f"{script} missing: the client package is not installed"
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "submit" in done.stdout and "watch" in done.stdout


def test_submit_list_describe_cancel(jobdash, tmp_path, cycling):
    (tmp_path / "two.yaml").write_text(manifest("second") + "---\n" + manifest("third"))
    done = jobdash("submit", EXAMPLES / "mnist-cpu.yaml", "-", tmp_path / "two.yaml", input=manifest("first"), check=0)
    rows = columns(done.stdout)
    ids = {row["NAME"]: int(row["ID"]) for row in rows}
    assert list(ids) == ["mnist-cpu", "first", "second", "third"]
    assert {(row["NAMESPACE"], row["STATE"]) for row in rows} == {("team-a", "Queued")}
    assert Job.objects.get(pk=ids["first"]).manifest == manifest("first")  # stdin, exactly as given

    Job.objects.filter(pk=ids["first"]).update(position=1, reason="QuotaExceeded")
    listed = columns(jobdash("list", "-n", "team-a", "--state", "queued", check=0).stdout)
    assert [row["NAME"] for row in listed] == ["third", "second", "first", "mnist-cpu"]  # newest first
    first = next(row for row in listed if row["NAME"] == "first")
    assert (first["KIND"], first["STATE"], first["PRIORITY"], first["POSITION"], first["REASON"]) == (
        "TFJob",
        "Queued",
        "0",
        "1",
        "QuotaExceeded",
    )
    assert first["AGE"].endswith("s")
    assert jobdash("list", "-n", "team-b", check=0).stdout.strip() == "No jobs."
    assert [row["NAME"] for row in columns(jobdash("list", "--name", "first", check=0).stdout)] == ["first"]
    by_part = columns(jobdash("list", "--name-contains", "IRS", check=0).stdout)
    assert [row["NAME"] for row in by_part] == ["first"]

    described = jobdash("describe", ids["first"], check=0).stdout
    assert "Name:" in described and "team-a/first" in described
    assert "State:        Queued" in described and "Position:     1" in described
    assert "Reason:       QuotaExceeded" in described
    assert "Run time:     no prediction yet" in described
    assert "Events:" in described and "Submitted" in described.split("Events:")[1]

    cancelled = jobdash("cancel", ids["first"], ids["second"], check=0)
    assert cancelled.stdout.splitlines() == [
        f"job {ids['first']} TFJob team-a/first Cancelled: cancelled by member",
        f"job {ids['second']} TFJob team-a/second Cancelled: cancelled by member",
    ]
    again = jobdash("cancel", ids["first"], ids["third"])
    assert again.returncode == 1
    assert again.stderr.startswith(f"jobdash: job {ids['first']}: refused (HTTP 409)")
    assert len(again.stderr.splitlines()) == 1
    assert Job.objects.get(pk=ids["third"]).state == "Cancelled"  # the others still go
    assert "Cancelled" in jobdash("describe", ids["first"], check=0).stdout.split("Events:")[1]


def test_queue_gives_the_order_and_start_ranges(jobdash):
    submitted = [jobdash("submit", "-", input=manifest(f"q-{i}"), check=0) for i in range(3)]
    ids = [int(columns(done.stdout)[0]["ID"]) for done in submitted]
    now = datetime.now(UTC)
    for position, job_id in zip((2, 1, 3), ids, strict=True):
        Job.objects.filter(pk=job_id).update(position=position, reason="QuotaExceeded")
    give_a_late_estimate(
        ids[1], now + timedelta(minutes=30, seconds=20), now + timedelta(hours=1, minutes=15, seconds=20)
    )
    text = jobdash("queue", "team-a", check=0).stdout
    rows = columns(text.split("\n*")[0])
    assert [(row["POSITION"], row["NAME"]) for row in rows] == [("1", "q-1"), ("2", "q-0"), ("3", "q-2")]
    assert (rows[0]["LIKELY START"], rows[0]["BY (90 %)"]) == ("in 30m", "in 1h15m *")
    assert (rows[1]["LIKELY START"], rows[1]["BY (90 %)"]) == ("-", "-")
    assert "* still waiting past the late bound it was first given" in text

    described = jobdash("describe", ids[1], check=0).stdout
    likely, late = now + timedelta(minutes=30, seconds=20), now + timedelta(hours=1, minutes=15, seconds=20)
    day = "" if late.date() == likely.date() else f"{late:%Y-%m-%d} "
    assert (
        f"Start:        likely start {likely:%Y-%m-%d %H:%M} UTC, by {day}{late:%H:%M} UTC at the latest (90 %) "
        "(past the late bound it was first given)"
    ) in described
    assert "First range:  likely start" in described
    assert "Run time:     likely 42m, 90 % within 2h6m (from user+name history)" in described

    missing = jobdash("queue", "nowhere")
    assert missing.returncode == 1 and missing.stderr.startswith("jobdash: ")
    assert "(no jobs waiting)" in jobdash("queue", "team-b", check=0).stdout


def test_json_and_yaml_are_the_apis_objects(jobdash, server):
    url, token = server
    jobdash("submit", EXAMPLES / "mnist-cpu.yaml", "-", input=manifest("other"), check=0)
    api = Client(url, token)
    expected = [dict(j.raw) for j in api.jobs()]
    listed = json.loads(jobdash("list", "-o", "json", check=0).stdout)
    assert _without_past_bound(listed) == _without_past_bound(expected)
    assert _without_past_bound(yaml.safe_load(jobdash("list", "-o", "yaml", check=0).stdout)) == _without_past_bound(
        expected
    )

    job_id = expected[0]["id"]
    detail = json.loads(jobdash("describe", job_id, "-o", "json", check=0).stdout)
    assert detail["manifest"] == api.get(job_id).raw["manifest"]
    assert [e["type"] for e in detail["events"]] == ["Submitted"]
    as_yaml = jobdash("describe", job_id, "-o", "yaml", check=0).stdout
    assert yaml.safe_load(as_yaml) == detail
    assert "manifest: |" in as_yaml  # the manifest reads as written

    queued = yaml.safe_load(jobdash("queue", "team-a", "-o", "yaml", check=0).stdout)
    assert {j["name"] for j in queued} == {"mnist-cpu", "other"}
    submitted = json.loads(jobdash("submit", "-", "-o", "json", input=manifest("third"), check=0).stdout)
    assert [(j["name"], j["state"]) for j in submitted] == [("third", "Queued")]


def _without_past_bound(jobs):
    return [{k: v for k, v in j.items() if k != "past_late_bound"} for j in jobs]


def test_wait_exit_codes(jobdash, server, tmp_path):
    url, token = server
    api = Client(url, token)
    running, failing, stuck = (api.submit(manifest(n)) for n in ("runs", "fails", "stuck"))

    def wait_in_background(job_id, state):
        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBDASH_")}
        env.update(JOBDASH_URL=url, JOBDASH_TOKEN=token, JOBDASH_CONFIG=str(tmp_path / "none.yaml"))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CLIENT), env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "jobdash_client.cli", "wait", str(job_id), "--for", state]
        return subprocess.Popen(
            [*command, "--timeout", "30", "--poll", "0.1"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    to_run = wait_in_background(running.id, "Running")
    to_succeed = wait_in_background(failing.id, "Succeeded")
    # Each says first what it finds; only once both have, do the jobs move on (no sleeping
    # on how fast a process starts).
    first = to_run.stderr.readline()
    assert to_succeed.stderr.readline().startswith("TFJob team-a/fails Queued")
    now = datetime.now(UTC)
    Job.objects.filter(pk=running.id).update(state="Released", released_at=now)
    Job.objects.filter(pk=running.id).update(state="Running", started_at=now)
    Job.objects.filter(pk=failing.id).update(state="Failed", finished_at=now, message="the TFJob failed: OOMKilled")
    out, err = to_run.communicate(timeout=60)
    assert to_run.returncode == 0, (out, err)
    assert out.strip() == f"job {running.id}: Running"
    assert first.startswith("TFJob team-a/runs Queued") and err.splitlines()[-1].endswith("Running")
    out, err = to_succeed.communicate(timeout=60)
    assert to_succeed.returncode == 1, (out, err)
    assert out.strip() == f"job {failing.id}: Failed, not Succeeded: the TFJob failed: OOMKilled"

    timed_out = jobdash("wait", stuck.id, "--for", "running", "--timeout", "0.5", "--poll", "0.1", "-q", check=2)
    assert timed_out.stdout.strip() == f"job {stuck.id}: still Queued after 0.5s (waited for Running)"
    assert timed_out.stderr == ""
    assert (
        jobdash("wait", running.id, "--for", "Released", check=0).stdout.strip()
        == f"job {running.id}: Running (it got to Released)"
    )
    missing = jobdash("wait", 999999, "--for", "finished", check=3)
    assert missing.stderr.strip() == "jobdash: job 999999 not found (HTTP 404)"


def test_watch_once(jobdash):
    for namespace, name in (("team-a", "a-1"), ("team-a", "a-2"), ("team-b", "b-1")):
        jobdash("submit", "-", input=manifest(name, namespace=namespace), check=0)
    one = jobdash("watch", "team-a", "--once", check=0).stdout
    banner, blank, *table = one.splitlines()
    assert banner.startswith("queue team-a   ") and banner.endswith(" UTC") and blank == ""  # not "Every 5s"
    assert [row["NAME"] for row in columns("\n".join(table))] == ["a-1", "a-2"]
    every = columns("\n".join(jobdash("watch", "--once", "-i", "2", check=0).stdout.splitlines()[2:]))
    assert [(row["NAMESPACE"], row["NAME"]) for row in every] == [
        ("team-a", "a-1"),
        ("team-a", "a-2"),
        ("team-b", "b-1"),
    ]
    as_json = json.loads(jobdash("watch", "team-b", "--once", "-o", "json", check=0).stdout)
    assert [j["name"] for j in as_json] == ["b-1"]


def test_a_closed_pipe_ends_the_command_quietly(jobdash):
    done = jobdash("submit", "-", input=manifest("piped"), check=0)
    job_id = columns(done.stdout)[0]["ID"]
    read, write = os.pipe()
    os.close(read)  # `| head` that has already gone: every write is EPIPE
    try:
        piped = jobdash("describe", job_id, "-o", "json", stdout=write)
    finally:
        os.close(write)
    assert (piped.returncode, piped.stderr) == (141, "")


def test_an_ssl_mismatch_is_one_plain_sentence(jobdash, server):
    url, token = server
    tls = url.replace("http://", "https://")  # the live server speaks plain HTTP
    done = jobdash("list", env={"JOBDASH_URL": tls, "JOBDASH_TOKEN": token})
    assert (done.returncode, done.stderr) == (
        1,
        f"jobdash: cannot reach {tls}: it does not speak TLS there (is the URL http://, not https://?)\n",
    )
    waited = jobdash(
        "wait", "1", "--for", "Succeeded", env={"JOBDASH_URL": "http://127.0.0.1:1", "JOBDASH_TOKEN": token}
    )
    assert waited.returncode == 3 and waited.stderr.startswith("jobdash: cannot reach http://127.0.0.1:1: ")


def test_config_precedence_flag_env_file(jobdash, server, tmp_path):
    url, token = server
    refused = "http://127.0.0.1:1"  # nothing listens there
    none = jobdash("list", env={})
    assert none.returncode == 1
    assert none.stderr.startswith("jobdash: no server configured: pass --server URL, set JOBDASH_URL")

    assert (
        jobdash("login", "--token", token, env={}, check=1).stderr
        == "jobdash: login needs --server URL (or JOBDASH_URL)\n"
    )
    saved = jobdash("login", "--server", url, "--token", token, env={}, check=0)
    config = tmp_path / "config.yaml"
    assert str(config) in saved.stdout
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert yaml.safe_load(config.read_text()) == {"server": url, "token": token}
    assert jobdash("list", env={}, check=0).stdout.strip() == "No jobs."  # the file alone

    # The environment wins over the file, a flag over the environment; each setting on its own.
    bad_env = jobdash("list", env={"JOBDASH_TOKEN": "wrong"})
    assert bad_env.returncode == 1 and "HTTP 401" in bad_env.stderr
    jobdash("--token", token, "list", env={"JOBDASH_TOKEN": "wrong"}, check=0)
    jobdash("list", "--token", token, env={"JOBDASH_TOKEN": "wrong"}, check=0)  # after the command too
    far = jobdash("list", env={"JOBDASH_URL": refused})
    assert far.returncode == 1
    assert far.stderr.strip() == f"jobdash: cannot reach {refused}: connection refused (is jobdash running there?)"
    jobdash("list", "--server", url, env={"JOBDASH_URL": refused}, check=0)
    other = tmp_path / "elsewhere.yaml"
    other.write_text(yaml.safe_dump({"server": refused, "token": token}))
    moved = jobdash("list", env={"JOBDASH_CONFIG": str(other)})
    assert "cannot reach http://127.0.0.1:1" in moved.stderr


def test_errors_are_one_line(jobdash, tmp_path):
    unauthorized = jobdash("--token", "not-a-token", "describe", "1")
    assert unauthorized.returncode == 1
    assert unauthorized.stderr.startswith("jobdash: not authenticated (HTTP 401: ")
    assert "jobdash login" in unauthorized.stderr and len(unauthorized.stderr.splitlines()) == 1

    missing = jobdash("describe", "999999")
    assert (missing.returncode, missing.stderr) == (1, "jobdash: job 999999 not found (HTTP 404)\n")

    (tmp_path / "bad.yaml").write_text(manifest("Bad_Name"))
    bad = jobdash("submit", tmp_path / "bad.yaml", "-", input=manifest("good"))
    assert bad.returncode == 1
    assert bad.stderr.startswith(f"jobdash: {tmp_path / 'bad.yaml'}: refused (HTTP 400): metadata.name: ")
    # One request for both: the good one is not submitted either.
    assert bad.stderr.splitlines()[-1] == "jobdash: nothing was submitted: the 2 jobs go in one request, all or none"
    assert bad.stdout == "" and not Job.objects.exists()
    alone = jobdash("submit", tmp_path / "bad.yaml")
    assert alone.stderr.startswith(f"jobdash: {tmp_path / 'bad.yaml'}: refused (HTTP 400): metadata.name: ")
    assert len(alone.stderr.splitlines()) == 1

    forbidden = jobdash("submit", "-", input=manifest("x", namespace="secret"))
    assert forbidden.returncode == 1 and "refused (HTTP 403)" in forbidden.stderr
    no_file = jobdash("submit", tmp_path / "absent.yaml")
    assert (
        no_file.returncode == 1
        and no_file.stderr == f"jobdash: {tmp_path / 'absent.yaml'}: No such file or directory\n"
    )
    usage = jobdash("wait", "1")  # --for is required: argparse's usage error
    assert usage.returncode == 2 and "--for" in usage.stderr


def test_several_manifests_go_in_one_request(jobdash, tmp_path, settings):
    (tmp_path / "pair.yaml").write_text(manifest("p-1") + "---\n" + manifest("p-2", namespace="team-b"))
    (tmp_path / "third.yaml").write_text(manifest("p-3"))
    done = jobdash("submit", tmp_path / "pair.yaml", tmp_path / "third.yaml", "-o", "json", check=0)
    created = json.loads(done.stdout)
    assert [(j["name"], j["namespace"]) for j in created] == [("p-1", "team-a"), ("p-2", "team-b"), ("p-3", "team-a")]
    assert [j.name for j in Job.objects.order_by("id")] == ["p-1", "p-2", "p-3"]

    # A refusal in the second document of a file names that document; nothing is stored.
    (tmp_path / "mixed.yaml").write_text(manifest("m-1") + "---\n" + manifest("m-2", namespace="secret"))
    refused = jobdash("submit", tmp_path / "third.yaml", tmp_path / "mixed.yaml")
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[0] == (
        f"jobdash: {tmp_path / 'mixed.yaml'} (document 2): refused (HTTP 403): "
        "you are not a member of namespace 'secret'"
    )
    # The server's cap on jobs per request is one refusal for the whole request.
    settings.JOBDASH_BULK_MAX_JOBS = 2
    capped = jobdash("submit", tmp_path / "pair.yaml", "-", input=manifest("p-4"))
    assert capped.returncode == 1
    assert capped.stderr.startswith("jobdash: refused (HTTP 413): more than 2 jobs in one request")
    assert Job.objects.count() == 3


def test_submit_with_a_priority_class(jobdash, settings):
    objects = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in {"low": 100, "normal": 1000, "urgent": 100000}.items()
    ]
    Namespace.objects.filter(name="team-a").update(max_priority_class="normal")
    with running_kubesim(cluster_config(objects=objects), manual_clock=True) as sim:
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        done = jobdash("submit", "-", "--priority-class", "low", input=manifest("classy"), check=0)
        row = columns(done.stdout)[0]
        assert (row["NAME"], row["STATE"]) == ("classy", "Queued")
        assert columns(jobdash("list", check=0).stdout)[0]["PRIORITY"] == "100 (low)"
        above = jobdash("submit", "-", "--priority-class", "urgent", input=manifest("pushy"))
        assert above.returncode == 1 and "refused (HTTP 403): priority_class: " in above.stderr
