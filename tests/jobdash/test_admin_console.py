"""The operators' console beyond the basics (tests/jobdash/test_admin.py): requeue, reasons
on actions, namespace policy overrides, API tokens. Every write goes through a service."""

import pytest
from rest_framework.authtoken.models import Token

from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import Job, Namespace, State

pytestmark = pytest.mark.django_db


def act(client, action, jobs, **extra):
    return client.post(
        "/admin/jobs/job/", {"action": action, "_selected_action": [j.pk for j in jobs], **extra}, follow=True
    )


def test_requeue_action_requeues_failed_and_marks_released_with_the_admin_as_actor(admin_client, jobs):
    failed, released, queued = jobs
    assert transitions.fail(failed.pk, "gave up")
    Job.objects.filter(pk=released.pk).update(state=State.RELEASED)
    response = act(admin_client, "requeue_jobs", jobs, reason="node repaired")
    assert b"2 job(s) requeued" in response.content
    messages = [str(m) for m in response.context["messages"]]
    assert any(m.startswith(f"{queued}: job {queued.pk} is Queued") for m in messages)  # the third: refused, by name
    failed.refresh_from_db(), released.refresh_from_db()
    assert failed.state == State.QUEUED
    assert released.state == State.RELEASED and released.requeue_requested_at is not None
    assert failed.events.last().actor == "root" and "node repaired" in failed.events.last().message
    assert released.events.last().type == "RequeueRequested" and released.events.last().actor == "root"


def test_cancel_action_records_the_reason(admin_client, jobs):
    act(admin_client, "cancel_jobs", jobs[:1], reason="wrong image")
    event = Job.objects.get(pk=jobs[0].pk).events.get(type="Cancelled")
    assert event.actor == "root" and "wrong image" in event.message


def test_set_priority_with_garbage_names_the_field_and_changes_nothing(admin_client, jobs):
    response = act(admin_client, "set_priority", jobs[:1], priority="high")
    assert b"must be an integer" in response.content
    assert Job.objects.get(pk=jobs[0].pk).priority == 0
    assert not Job.objects.get(pk=jobs[0].pk).events.filter(type="PriorityChanged").exists()


def test_job_list_shows_position_and_reason_and_filters_by_source(admin_client, jobs):
    Job.objects.filter(pk=jobs[0].pk).update(position=1, reason="QuotaExceeded")
    page = admin_client.get("/admin/jobs/job/?source__exact=api").content
    assert b"QuotaExceeded" in page and b"a-0" in page
    assert b"a-0" not in admin_client.get("/admin/jobs/job/?source__exact=webhook").content


def namespace_form(namespace: Namespace, **changes) -> dict:
    data = {
        "name": namespace.name,
        "weight": namespace.weight,
        "policy": namespace.policy,
        "members": [u.pk for u in namespace.members.all()],
        "groups": [g.pk for g in namespace.groups.all()],
    }
    data.update(changes)
    return data


def test_namespace_policy_override_is_set_and_shown(admin_client, team_a, alice):
    response = admin_client.post(f"/admin/jobs/namespace/{team_a.pk}/change/", namespace_form(team_a, policy="fifo"))
    assert response.status_code == 302
    team_a.refresh_from_db()
    assert team_a.policy == "fifo" and list(team_a.members.all()) == [alice]  # members kept
    listing = admin_client.get("/admin/jobs/namespace/").content.decode()
    assert "fifo" in listing and "(global: priority)" in listing  # team-b has no override


@pytest.mark.parametrize("changes, field", [({"policy": "lottery"}, "policy"), ({"weight": 0}, "weight")])
def test_bad_namespace_settings_are_refused_by_field(admin_client, team_a, changes, field):
    response = admin_client.post(f"/admin/jobs/namespace/{team_a.pk}/change/", namespace_form(team_a, **changes))
    assert response.status_code == 200  # the form again, with its errors
    assert field in response.context["adminform"].form.errors
    team_a.refresh_from_db()
    assert team_a.policy == "" and team_a.weight == 1


def test_namespaces_cannot_be_deleted(admin_client, team_a):
    assert admin_client.post(f"/admin/jobs/namespace/{team_a.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Namespace.objects.filter(pk=team_a.pk).exists()


def test_events_are_read_only(admin_client, jobs):
    event = jobs[0].events.get()
    assert admin_client.get(f"/admin/jobs/jobevent/{event.pk}/change/").status_code == 200
    admin_client.post(f"/admin/jobs/jobevent/{event.pk}/change/", {"type": "Forged", "actor": "x"})
    event.refresh_from_db()
    assert event.type == "Submitted"
    assert admin_client.get("/admin/jobs/jobevent/add/").status_code == 403


def test_tokens_are_issued_once_visibly_listed_masked_and_revoked(admin_client, alice):
    old = Token.objects.create(user=alice)
    response = admin_client.post("/admin/authtoken/tokenproxy/add/", {"user": alice.pk}, follow=True)
    new = Token.objects.get(user=alice)
    assert new.key != old.key  # issuing for a user with a token replaces it
    assert new.key.encode() in response.content  # shown once, in the message
    listing = admin_client.get("/admin/authtoken/tokenproxy/").content
    assert new.key.encode() not in listing and new.key[:4].encode() in listing
    assert admin_client.post(f"/admin/authtoken/tokenproxy/{alice.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Token.objects.filter(user=alice).exists()


def test_token_page_still_issues_and_revokes_through_the_service(client, alice):
    client.force_login(alice)
    client.post("/account/token/", {"action": "create"})
    first = Token.objects.get(user=alice).key
    client.post("/account/token/", {"action": "create"})
    assert Token.objects.get(user=alice).key != first
    client.post("/account/token/", {"action": "revoke"})
    assert not Token.objects.filter(user=alice).exists()
