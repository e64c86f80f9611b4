import pytest

from jobdash.jobs import services
from jobdash.jobs.exceptions import Conflict, InvalidInput, NotFound, NotMember
from jobdash.jobs.models import Job, JobEvent, State

from .conftest import with_name

pytestmark = pytest.mark.django_db


def test_submit_stores_manifest_exactly_and_records_an_event(alice, example_text):
    text = example_text("dist-ps-worker")
    job = services.job_submit(user=alice, manifest=text, source="api")
    job.refresh_from_db()
    assert job.manifest == text
    assert (job.state, job.priority, job.name, job.namespace.name) == (State.QUEUED, 0, "dist-mnist-ps", "team-a")
    assert job.workload["pods"] == 6
    assert job.workload["requests"]["cpu"] == 2 * 1000 + 4 * 4000
    assert job.submitted_by == alice and job.submitted_by_name == "alice"
    assert list(job.events.values_list("type", "actor")) == [("Submitted", "alice")]


def test_submit_accepts_utf8_bytes(alice, example_text):
    text = "# ünïcode comment\n" + example_text("mnist-cpu")
    job = services.job_submit(user=alice, manifest=text.encode(), source="api")
    assert Job.objects.get(pk=job.pk).manifest == text


def test_group_membership_counts(bob, example_text):
    job = services.job_submit(user=bob, manifest=example_text("resnet-multi-gpu"), source="web")
    assert job.namespace.name == "team-b" and job.workload["requests"]["nvidia.com/gpu"] == 16


def test_non_member_is_refused_without_a_write(alice, team_b, example_text):
    with pytest.raises(NotMember):
        services.job_submit(user=alice, manifest=example_text("resnet-multi-gpu"), source="api")
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0


def test_unknown_namespace_looks_like_not_a_member(alice, example_text):
    text = example_text("mnist-cpu").replace("namespace: team-a", "namespace: secret-team")
    with pytest.raises(NotMember):
        services.job_submit(user=alice, manifest=text, source="api")


def test_staff_learns_that_a_namespace_is_not_managed(staff, example_text):
    text = example_text("mnist-cpu").replace("namespace: team-a", "namespace: nowhere")
    with pytest.raises(InvalidInput) as error:
        services.job_submit(user=staff, manifest=text, source="api")
    assert error.value.problems[0].path == "metadata.namespace"


def test_namespace_from_argument_when_manifest_has_none(alice, example_text):
    text = example_text("mnist-cpu").replace("  namespace: team-a\n", "")
    with pytest.raises(InvalidInput) as error:
        services.job_submit(user=alice, manifest=text, source="api")
    assert error.value.problems[0].path == "metadata.namespace"
    job = services.job_submit(user=alice, manifest=text, source="api", namespace="team-a")
    assert job.namespace.name == "team-a"


def test_namespace_argument_must_agree_with_manifest(alice, team_b, example_text):
    with pytest.raises(InvalidInput) as error:
        services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="api", namespace="team-b")
    assert error.value.problems[0].path == "metadata.namespace"


def test_duplicate_active_name_is_a_conflict(alice, example_text):
    services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="api")
    with pytest.raises(Conflict):
        services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="api")
    assert Job.objects.count() == 1 and JobEvent.objects.count() == 1


def test_name_is_free_again_after_cancel(alice, example_text):
    first = services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="api")
    services.job_cancel(job_id=first.pk, user=alice)
    second = services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="api")
    assert second.pk != first.pk and second.state == State.QUEUED


@pytest.mark.parametrize("priority", ["high", 1.5, True, None, 10**7, -(10**7)])
def test_bad_priority_names_the_field(alice, example_text, priority):
    with pytest.raises(InvalidInput) as error:
        services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="api", priority=priority)
    assert error.value.problems[0].path == "priority"


def test_priority_from_a_query_string(staff, team_a, example_text):
    job = services.job_submit(
        user=staff, manifest=example_text("mnist-cpu"), source="api", priority=" -3 ", namespace="team-a"
    )
    assert job.priority == -3


def test_cancel_is_compare_and_set(alice, example_text):
    job = services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="api")
    cancelled = services.job_cancel(job_id=job.pk, user=alice, reason="wrong data")
    assert cancelled.state == State.CANCELLED and cancelled.finished_at is not None
    event = cancelled.events.get(type="Cancelled")
    assert event.actor == "alice" and "wrong data" in event.message
    with pytest.raises(Conflict, match="already Cancelled"):
        services.job_cancel(job_id=job.pk, user=alice)
    assert cancelled.events.filter(type="Cancelled").count() == 1


def test_cancel_of_an_invisible_job_is_not_found(alice, bob, example_text):
    job = services.job_submit(user=bob, manifest=example_text("resnet-multi-gpu"), source="api")
    with pytest.raises(NotFound):
        services.job_cancel(job_id=job.pk, user=alice)
    assert Job.objects.get(pk=job.pk).state == State.QUEUED


def test_cancel_does_not_touch_finished_jobs(alice, example_text):
    job = services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="api")
    Job.objects.filter(pk=job.pk).update(state=State.SUCCEEDED)
    with pytest.raises(Conflict):
        services.job_cancel(job_id=job.pk, user=alice)
    assert Job.objects.get(pk=job.pk).state == State.SUCCEEDED


def test_set_priority_is_staff_only_and_recorded(alice, staff, example_text):
    job = services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="api")
    with pytest.raises(NotMember):
        services.job_set_priority(job_id=job.pk, user=alice, priority=100)
    changed = services.job_set_priority(job_id=job.pk, user=staff, priority=100)
    assert changed.priority == 100
    event = changed.events.get(type="PriorityChanged")
    assert (event.actor, event.message) == ("root", "priority 0 -> 100")


def test_many_jobs_same_namespace(alice, example_text):
    for i in range(5):
        services.job_submit(user=alice, manifest=with_name(example_text("mnist-cpu"), f"run-{i}"), source="api")
    assert Job.objects.filter(namespace__name="team-a", state=State.QUEUED).count() == 5


def test_membership_probe_agrees_with_what_a_user_sees(alice, bob, team_a, team_b, django_user_model):
    from jobdash.jobs import selectors

    staff = django_user_model.objects.create_user("root", is_staff=True)
    gone = django_user_model.objects.create_user("gone", is_active=False)
    team_a.members.add(gone)
    for user in (alice, bob, staff, gone):
        visible = set(selectors.namespaces_visible_to(user))
        for namespace in (team_a, team_b):
            assert selectors.is_member(user, namespace) == (namespace in visible), (user, namespace)
    assert selectors.is_member(bob, team_b) and not selectors.is_member(bob, team_a)
    assert not selectors.is_member(gone, team_a)
