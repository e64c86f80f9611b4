import pytest

from jobdash.jobs.models import Job, State

pytestmark = pytest.mark.django_db


def test_admin_lists_and_filters_jobs(admin_client, jobs):
    page = admin_client.get("/admin/jobs/job/")
    assert page.status_code == 200
    for job in jobs:
        assert job.name.encode() in page.content
    filtered = admin_client.get("/admin/jobs/job/?state__exact=Running")
    assert b"a-0" not in filtered.content
    searched = admin_client.get("/admin/jobs/job/?q=a-1").content
    assert b"a-1" in searched and b"a-2" not in searched


def test_admin_job_page_shows_manifest_and_events_read_only(admin_client, jobs):
    page = admin_client.get(f"/admin/jobs/job/{jobs[0].pk}/change/")
    assert page.status_code == 200
    assert b"Submitted" in page.content and b"tf-mnist-with-summaries" in page.content
    assert b'name="manifest"' not in page.content  # not editable
    # indentation kept (YAML's structure), and no Save buttons on a page that cannot save
    html = page.content.decode()
    assert '<pre class="manifest">' in html and "\n  name: " in html.split('<pre class="manifest">')[1]
    assert 'name="_save"' not in html and 'name="_continue"' not in html and 'name="_addanother"' not in html
    event = jobs[0].events.first()
    assert 'name="_save"' not in admin_client.get(f"/admin/jobs/jobevent/{event.pk}/change/").content.decode()


def test_admin_cancel_action_goes_through_the_service(admin_client, jobs):
    response = admin_client.post(
        "/admin/jobs/job/",
        {"action": "cancel_jobs", "_selected_action": [jobs[0].pk, jobs[1].pk]},
        follow=True,
    )
    assert b"2 job(s) cancelled" in response.content
    assert list(Job.objects.filter(state=State.CANCELLED).order_by("pk").values_list("pk", flat=True)) == [
        jobs[0].pk,
        jobs[1].pk,
    ]
    assert Job.objects.get(pk=jobs[0].pk).events.get(type="Cancelled").actor == "root"


def test_admin_set_priority_action(admin_client, jobs):
    admin_client.post(
        "/admin/jobs/job/",
        {"action": "set_priority", "priority": "42", "_selected_action": [jobs[2].pk]},
        follow=True,
    )
    job = Job.objects.get(pk=jobs[2].pk)
    assert job.priority == 42
    assert job.events.get(type="PriorityChanged").actor == "root"


def test_admin_set_priority_requires_a_value(admin_client, jobs):
    response = admin_client.post(
        "/admin/jobs/job/", {"action": "set_priority", "priority": "", "_selected_action": [jobs[0].pk]}, follow=True
    )
    assert b"Enter a priority" in response.content
    assert Job.objects.get(pk=jobs[0].pk).priority == 0


def test_admin_cannot_delete_or_edit_jobs(admin_client, jobs):
    assert admin_client.get(f"/admin/jobs/job/{jobs[0].pk}/delete/").status_code in (302, 403)
    admin_client.post(f"/admin/jobs/job/{jobs[0].pk}/change/", {"priority": 99, "state": "Running"})
    job = Job.objects.get(pk=jobs[0].pk)
    assert (job.priority, job.state) == (0, State.QUEUED)


def test_admin_submits_through_the_service(admin_client, example_text):
    page = admin_client.get("/admin/jobs/job/add/")
    assert page.status_code == 200 and b"Submit job" in page.content
    response = admin_client.post(
        "/admin/jobs/job/add/", {"namespace": "", "priority": 9, "manifest": example_text("resnet-multi-gpu")}
    )
    job = Job.objects.get()
    assert response.status_code == 302 and (job.source, job.priority, job.namespace.name) == ("admin", 9, "team-b")
    bad = admin_client.post("/admin/jobs/job/add/", {"namespace": "", "priority": 0, "manifest": "kind: Nope\n"})
    assert b"<code>apiVersion</code>" in bad.content and Job.objects.count() == 1


def test_admin_namespace_membership(admin_client, alice, team_b):
    response = admin_client.post(
        f"/admin/jobs/namespace/{team_b.pk}/change/",
        {"name": "team-b", "weight": 3, "members": [alice.pk], "groups": []},
    )
    assert response.status_code == 302
    team_b.refresh_from_db()
    assert team_b.weight == 3 and alice in team_b.members.all()
