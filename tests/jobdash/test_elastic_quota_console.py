"""Elastic quota as admins set it and users see it (#15): the validating write service, the
admin console, the REST API and the pages. The planner's side is tests/queueing/."""

import json
import time

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from jobdash.jobs import elastic, services
from jobdash.jobs.exceptions import NotFound, NotMember
from jobdash.jobs.models import ClusterState, Job, JobEvent, Namespace, State

from .conftest import token_client

pytestmark = pytest.mark.django_db
GPU = "requests.nvidia.com/gpu"
GIB = 1024**3


def node(name, gpus, cpu=32000, unschedulable=False):
    return {
        "name": name,
        "allocatable": {"cpu": cpu, "memory": 128 * GIB, "nvidia.com/gpu": gpus, "pods": 110},
        "allocated": {},
        "labels": {},
        "unschedulable": unschedulable,
    }


# 16 schedulable GPUs, 64 cpu: the third node is cordoned and counts for nothing.
NODES = [node("gpu-1", 8), node("gpu-2", 8), node("gpu-3", 8, unschedulable=True)]


def publish(quotas=None, nodes=NODES):
    ClusterState.objects.update_or_create(
        id=1, defaults={"updated_at": timezone.now(), "quotas": quotas or {}, "nodes": nodes}
    )


def refused(call) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        call()
    return caught.value.message_dict


def elastic_fields(name: str) -> dict:
    return Namespace.objects.filter(name=name).values(*elastic.FIELDS).get()


# --- the service ----------------------------------------------------------------------------


def test_staff_sets_guarantee_cohort_and_limit_as_written(staff, team_a):
    publish({"team-a": {"hard": {GPU: 16, "cpu": 64000}, "used": {}, "reserved": {}}})
    ns = services.set_elastic_quota(
        team_a, user=staff, guaranteed={GPU: 8, "cpu": " 20 "}, cohort="research", borrowing_limit={GPU: "4"}
    )
    assert ns.guaranteed == {GPU: "8", "cpu": "20"} and ns.cohort == "research"
    assert ns.borrowing_limit == {GPU: "4"}
    assert elastic.amounts(ns.guaranteed) == {GPU: 8, "cpu": 20000}  # what the planner reads
    # a field not given stays as it is; an empty guarantee makes the namespace plain again
    services.set_elastic_quota("team-a", user=staff, cohort="")
    assert elastic_fields("team-a") == {
        "guaranteed": {GPU: "8", "cpu": "20"},
        "cohort": "",
        "borrowing_limit": {GPU: "4"},
    }
    services.set_elastic_quota("team-a", user=staff, guaranteed={}, borrowing_limit={})
    assert elastic_fields("team-a") == {"guaranteed": {}, "cohort": "", "borrowing_limit": {}}


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"guaranteed": {"limits.cpu": "4"}}, "guaranteed", "limits.cpu: limits are not guaranteed"),
        ({"guaranteed": {"count/tfjobs.kubeflow.org": "2"}}, "guaranteed", "an object count cannot be guaranteed"),
        ({"guaranteed": {"pods": "10"}}, "guaranteed", "pods: not a compute resource quota key"),
        ({"guaranteed": {"requests.gpu": "1"}}, "guaranteed", "extended resource is named <domain>/<name>"),
        ({"guaranteed": {GPU: "-1"}}, "guaranteed", f"{GPU}: must be >= 0"),
        ({"guaranteed": {GPU: "lots"}}, "guaranteed", f"{GPU}: invalid quantity 'lots'"),
        ({"guaranteed": {GPU: "0.5"}}, "guaranteed", "not a whole number of nvidia.com/gpu"),
        ({"guaranteed": {GPU: True}}, "guaranteed", "a quantity such as 16"),
        ({"guaranteed": {"cpu": "4", "requests.cpu": "4"}}, "guaranteed", "the same resource"),
        ({"guaranteed": ["cpu"]}, "guaranteed", "an object of quota keys and quantities"),
        ({"cohort": "Research Team"}, "cohort", "a cohort name is at most 63 lower-case letters"),
        ({"guaranteed": {GPU: "4"}, "borrowing_limit": {"cpu": "4"}}, "borrowing_limit", "cpu: not a guaranteed key"),
        ({"borrowing_limit": {GPU: "4"}}, "borrowing_limit", "guaranteed keys: none"),
        ({"guaranteed": {GPU: "4"}, "borrowing_limit": {GPU: "-2"}}, "borrowing_limit", "must be >= 0"),
    ],
)
def test_each_refusal_names_its_field_and_writes_nothing(staff, team_a, changes, field, words):
    before = elastic_fields("team-a")
    problems = refused(lambda: services.set_elastic_quota(team_a, user=staff, **changes))
    assert list(problems) == [field] and any(words in message for message in problems[field]), problems
    assert elastic_fields("team-a") == before


def test_problems_of_several_fields_come_together(staff, team_a):
    problems = refused(
        lambda: services.set_elastic_quota(team_a, user=staff, guaranteed={"limits.memory": "1Gi"}, cohort="A B")
    )
    assert set(problems) == {"guaranteed", "cohort"}


def test_a_guarantee_above_the_resourcequota_hard_is_refused(staff, team_a):
    publish({"team-a": {"hard": {GPU: 8, "cpu": 16000}, "used": {}, "reserved": {}}})
    problems = refused(lambda: services.set_elastic_quota(team_a, user=staff, guaranteed={GPU: "12"}))
    assert problems == {"guaranteed": [f"{GPU}: 12 is more than the ResourceQuota hard of team-a (8)"]}
    assert services.set_elastic_quota(team_a, user=staff, guaranteed={GPU: "8"}).guaranteed == {GPU: "8"}


def test_a_guaranteed_key_must_be_one_the_resourcequota_limits(staff, team_a):
    """ResourceQuota status reports the usage of its hard keys only: a guarantee of anything
    else could not be weighed against what the namespace holds."""
    publish({"team-a": {"hard": {GPU: 8, "cpu": 16000}, "used": {}, "reserved": {}}})
    problems = refused(
        lambda: services.set_elastic_quota(team_a, user=staff, guaranteed={"requests.cpu": "8", "memory": "1Gi"})
    )
    assert problems == {
        "guaranteed": [
            "requests.cpu: the ResourceQuota of team-a limits cpu, not requests.cpu; guarantee that",
            "memory: the ResourceQuota of team-a does not limit it (hard: cpu, requests.nvidia.com/gpu), "
            "so its usage is unknown; add it to the ResourceQuota first",
        ]
    }
    assert services.set_elastic_quota(team_a, user=staff, guaranteed={"cpu": "8"}).guaranteed == {"cpu": "8"}


def test_without_a_cycle_the_cluster_is_unknown_and_nothing_is_compared(staff, team_a):
    assert services.set_elastic_quota(team_a, user=staff, guaranteed={GPU: "1000"}).guaranteed == {GPU: "1000"}


def test_a_cohort_cannot_guarantee_more_than_the_cluster_holds(staff, team_a, team_b):
    publish()
    services.set_elastic_quota(team_a, user=staff, guaranteed={GPU: "10"}, cohort="research")
    problems = refused(lambda: services.set_elastic_quota(team_b, user=staff, guaranteed={GPU: "8"}, cohort="research"))
    assert problems == {
        "guaranteed": [
            f"{GPU}: cohort 'research' would guarantee 18 nvidia.com/gpu in all (team-b 8, team-a 10), "
            "more than the 16 the cluster's schedulable nodes hold"
        ]
    }
    assert elastic_fields("team-b") == {"guaranteed": {}, "cohort": "", "borrowing_limit": {}}  # no partial write
    # another cohort is another pool of guarantees, and 6 more fit this one
    services.set_elastic_quota(team_b, user=staff, guaranteed={GPU: "8"}, cohort="vision")
    services.set_elastic_quota(team_b, user=staff, guaranteed={GPU: "6"}, cohort="research")
    # moving in is adding: the cluster-wide cohort (blank) has room, research has none left
    third = Namespace.objects.create(name="team-c", cohort="research")
    assert refused(lambda: services.set_elastic_quota(third, user=staff, guaranteed={GPU: "1"}))["guaranteed"]
    services.set_elastic_quota(third, user=staff, guaranteed={GPU: "16"}, cohort="")


def test_cpu_and_requests_cpu_add_up_as_one_node_resource(staff, team_a, team_b):
    publish()
    services.set_elastic_quota(team_a, user=staff, guaranteed={"cpu": "40"})
    problems = refused(lambda: services.set_elastic_quota(team_b, user=staff, guaranteed={"requests.cpu": "30"}))
    assert "the cluster-wide cohort would guarantee 70 cpu in all (team-b 30, team-a 40)" in problems["guaranteed"][0]


def test_lowering_a_guarantee_of_an_overfull_cohort_is_allowed(staff, team_a, team_b):
    """Nodes went away: the cohort guarantees more than the cluster holds. Lowering a
    guarantee must not be refused for it; raising one is."""
    publish(nodes=[node("big", 32)])
    services.set_elastic_quota(team_a, user=staff, guaranteed={GPU: "16"})
    services.set_elastic_quota(team_b, user=staff, guaranteed={GPU: "16"})
    publish(nodes=[node("small", 8)])
    assert services.set_elastic_quota(team_a, user=staff, guaranteed={GPU: "12"}).guaranteed == {GPU: "12"}
    assert refused(lambda: services.set_elastic_quota(team_a, user=staff, guaranteed={GPU: "13"}))["guaranteed"]


def test_members_may_not_set_it_and_non_members_do_not_see_the_namespace(alice, bob, team_a):
    with pytest.raises(NotMember):
        services.set_elastic_quota(team_a, user=alice, guaranteed={GPU: "1"})
    with pytest.raises(NotFound):
        services.set_elastic_quota(team_a, user=bob, guaranteed={GPU: "1"})
    assert elastic_fields("team-a")["guaranteed"] == {}


@pytest.mark.django_db(transaction=True)
def test_concurrent_edits_of_one_cohort_are_serialised(staff, team_a, team_b, monkeypatch):
    """Two admins each guarantee 10 of the cluster's 16 GPUs to a different namespace at
    once: each alone fits, both together do not. The second waits for the first's lock and
    then sees its guarantee, so exactly one is saved."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Event

    from django.db import connection

    from jobdash.jobs import selectors

    publish()
    read = selectors.cluster_quotas_and_nodes
    first_checking = Event()

    def slow_read():
        first = not first_checking.is_set()
        first_checking.set()
        if first:
            time.sleep(0.5)  # holding the lock: the other edit must wait, not check alongside
        return read()

    monkeypatch.setattr(selectors, "cluster_quotas_and_nodes", slow_read)

    def edit(name):
        try:
            if name == "team-b":
                first_checking.wait(5)
            services.set_elastic_quota(name, user=staff, guaranteed={GPU: "10"})
            return "saved"
        except ValidationError as error:
            return error.message_dict["guaranteed"][0]
        finally:
            connection.close()

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(edit, ["team-a", "team-b"]))
    assert outcomes[0] == "saved" and "would guarantee 20 nvidia.com/gpu in all" in outcomes[1], outcomes
    assert elastic_fields("team-b")["guaranteed"] == {}


# --- the admin console ----------------------------------------------------------------------


def namespace_form(namespace: Namespace, **changes) -> dict:
    data = {
        "name": namespace.name,
        "weight": namespace.weight,
        "policy": namespace.policy,
        "members": [u.pk for u in namespace.members.all()],
        "groups": [g.pk for g in namespace.groups.all()],
        "guaranteed": json.dumps(namespace.guaranteed),
        "cohort": namespace.cohort,
        "borrowing_limit": json.dumps(namespace.borrowing_limit),
    }
    data.update(changes)
    return data


def change_namespace(client, namespace, **changes):
    return client.post(f"/admin/jobs/namespace/{namespace.pk}/change/", namespace_form(namespace, **changes))


def test_admin_edits_the_elastic_quota_and_lists_it(admin_client, team_a, alice):
    publish({"team-a": {"hard": {GPU: 16}, "used": {}, "reserved": {}}})
    response = change_namespace(
        admin_client, team_a, guaranteed=f'{{"{GPU}": 8}}', cohort="research", borrowing_limit=f'{{"{GPU}": "4"}}'
    )
    assert response.status_code == 302
    assert elastic_fields("team-a") == {"guaranteed": {GPU: "8"}, "cohort": "research", "borrowing_limit": {GPU: "4"}}
    assert list(Namespace.objects.get(pk=team_a.pk).members.all()) == [alice]  # the rest of the form kept
    page = admin_client.get(f"/admin/jobs/namespace/{team_a.pk}/change/").content.decode()
    assert "Elastic quota" in page and "research" in page and GPU in page
    listing = admin_client.get("/admin/jobs/namespace/").content.decode()
    assert f"{GPU} 8" in listing and "research" in listing
    # emptied boxes: the namespace is not elastic any more
    assert change_namespace(admin_client, team_a, guaranteed="", cohort="", borrowing_limit="").status_code == 302
    assert elastic_fields("team-a") == {"guaranteed": {}, "cohort": "", "borrowing_limit": {}}


def test_admin_adds_an_elastic_namespace_within_the_cohort(admin_client, staff, team_b):
    publish()
    services.set_elastic_quota(team_b, user=staff, guaranteed={GPU: "10"})
    form = {
        "name": "team-c",
        "weight": 1,
        "policy": "",
        "members": [],
        "groups": [],
        "cohort": "",
        "borrowing_limit": "",
    }
    response = admin_client.post("/admin/jobs/namespace/add/", {**form, "guaranteed": f'{{"{GPU}": "7"}}'})
    assert "would guarantee 17 nvidia.com/gpu in all (team-c 7, team-b 10)" in " ".join(
        response.context["adminform"].form.errors["guaranteed"]
    )
    assert not Namespace.objects.filter(name="team-c").exists()
    response = admin_client.post("/admin/jobs/namespace/add/", {**form, "guaranteed": f'{{"{GPU}": "6"}}'})
    assert response.status_code == 302 and elastic_fields("team-c")["guaranteed"] == {GPU: "6"}


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"guaranteed": '{"limits.cpu": "4"}'}, "guaranteed", "limits are not guaranteed"),
        ({"guaranteed": f'{{"{GPU}": "12"}}'}, "guaranteed", "more than the ResourceQuota hard of team-a"),
        ({"guaranteed": "{not json"}, "guaranteed", "Enter a valid JSON"),
        ({"cohort": "No Spaces"}, "cohort", "a cohort name is"),
        ({"borrowing_limit": '{"cpu": "1"}'}, "borrowing_limit", "not a guaranteed key"),
    ],
)
def test_admin_refuses_bad_elastic_quota_on_its_field(admin_client, team_a, changes, field, words):
    publish({"team-a": {"hard": {GPU: 8}, "used": {}, "reserved": {}}})
    response = change_namespace(admin_client, team_a, weight=5, **changes)
    assert response.status_code == 200  # the form again, with its errors
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field] and words in " ".join(errors[field]), errors
    assert Namespace.objects.get(pk=team_a.pk).weight == 1  # nothing of the form saved


def test_admin_refuses_a_cohort_over_the_cluster_naming_the_numbers(admin_client, staff, team_a, team_b):
    publish()
    services.set_elastic_quota(team_b, user=staff, guaranteed={GPU: "10"})
    response = change_namespace(admin_client, team_a, guaranteed=f'{{"{GPU}": "10"}}')
    errors = response.context["adminform"].form.errors["guaranteed"]
    assert errors == [
        f"{GPU}: the cluster-wide cohort would guarantee 20 nvidia.com/gpu in all (team-a 10, team-b 10), "
        "more than the 16 the cluster's schedulable nodes hold"
    ]
    assert elastic_fields("team-a")["guaranteed"] == {}


def test_admin_save_refused_under_the_lock_rolls_back_and_says_why(admin_client, staff, team_a, team_b, monkeypatch):
    """Another admin's edit can commit between the form's check and the save: the save's
    own check (under the lock) refuses it, nothing of the form is saved, the page says why."""
    publish()
    monkeypatch.setattr(services, "elastic_quota_check", lambda namespace, **values: values)  # the form saw room
    services.set_elastic_quota(team_b, user=staff, guaranteed={GPU: "10"})
    response = change_namespace(admin_client, team_a, weight=3, guaranteed=f'{{"{GPU}": "10"}}')
    assert response.status_code == 302 and response.url == f"/admin/jobs/namespace/{team_a.pk}/change/"
    page = admin_client.get(response.url).content.decode()
    assert "Not saved: guaranteed:" in page and "would guarantee 20 nvidia.com/gpu" in page
    team_a.refresh_from_db()
    assert team_a.guaranteed == {} and team_a.weight == 1


def test_admin_job_page_shows_borrowing_and_preemption(admin_client, jobs):
    victim, preemptor, _ = jobs
    Job.objects.filter(pk=victim.pk).update(
        state=State.RUNNING, borrowing=True, preemptions=2, preempted_for=preemptor, preempt_at=timezone.now()
    )
    Job.objects.filter(pk=preemptor.pk).update(preempted_by=victim)
    page = admin_client.get(f"/admin/jobs/job/{victim.pk}/change/").content.decode()
    for label in ("Borrowing", "Preemptions", "Preempted for", "Preempt at", "Preempted by"):
        assert label in page, label
    assert f"/admin/jobs/job/{preemptor.pk}/change/" in page  # the job it is preempted for, linked
    listing = admin_client.get("/admin/jobs/job/?borrowing__exact=1").content.decode()
    assert "a-0" in listing and "a-1" not in listing


# --- the REST API ---------------------------------------------------------------------------


@pytest.fixture
def elastic_team_a(staff, team_a):
    """team-a: 8 GPUs hard, 4 guaranteed in cohort research; 5 used and 1 reserved, so 2 borrowed."""
    publish({"team-a": {"hard": {GPU: 8, "cpu": 64000}, "used": {GPU: 5, "cpu": 6500}, "reserved": {GPU: 1}}})
    return services.set_elastic_quota(
        team_a, user=staff, guaranteed={GPU: "4", "cpu": "8"}, cohort="research", borrowing_limit={GPU: "3"}
    )


def test_namespaces_show_the_elastic_quota_and_its_figures(api, elastic_team_a, bob):
    (listed,) = api.get("/api/v1/namespaces/").json()["results"]
    detail = api.get("/api/v1/namespaces/team-a/").json()
    assert listed == detail
    assert detail["guaranteed"] == {GPU: "4", "cpu": "8"} and detail["cohort"] == "research"
    assert detail["borrowing_limit"] == {GPU: "3"}
    quota = detail["quota"]
    assert quota["guaranteed"] == {"cpu": "8", GPU: "4"}
    assert quota["borrowed"] == {"cpu": "0", GPU: "2"}  # 5 used + 1 reserved, 4 guaranteed
    assert quota["guaranteed_free"] == {"cpu": "1500m", GPU: "0"}
    assert quota["free"] == {"cpu": "57500m", GPU: "2"}
    assert token_client(bob).get("/api/v1/namespaces/team-a/").status_code == 404


def test_a_plain_namespace_has_no_guarantee(api, team_a):
    publish({"team-a": {"hard": {GPU: 8}, "used": {GPU: 5}, "reserved": {}}})
    detail = api.get("/api/v1/namespaces/team-a/").json()
    assert detail["guaranteed"] == {} and detail["cohort"] == "" and detail["borrowing_limit"] == {}
    assert detail["quota"]["guaranteed"] == {} and detail["quota"]["borrowed"] == {}
    assert detail["quota"]["free"] == {GPU: "3"}


def test_staff_patches_the_elastic_quota(staff_api, api):
    publish()
    response = staff_api.patch(
        "/api/v1/namespaces/team-a/", {"guaranteed": {GPU: 8}, "cohort": "research"}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["guaranteed"] == {GPU: "8"} and response.json()["cohort"] == "research"
    assert response.json()["queue_length"] == 0  # the namespace as the list shows it
    # fields not given stay
    response = staff_api.patch("/api/v1/namespaces/team-a/", {"borrowing_limit": {GPU: "2"}}, format="json")
    assert elastic_fields("team-a") == {"guaranteed": {GPU: "8"}, "cohort": "research", "borrowing_limit": {GPU: "2"}}
    assert api.get("/api/v1/namespaces/team-a/").json()["borrowing_limit"] == {GPU: "2"}


def test_members_may_not_patch(api, team_a):
    response = api.patch("/api/v1/namespaces/team-a/", {"guaranteed": {GPU: "8"}}, format="json")
    assert response.status_code == 403 and "only staff" in response.json()["errors"][0]["message"]
    assert api.patch("/api/v1/namespaces/team-b/", {"cohort": "x"}, format="json").status_code == 404
    assert elastic_fields("team-a")["guaranteed"] == {}


@pytest.mark.parametrize(
    "body, path, words",
    [
        ({"guaranteed": {"limits.cpu": "4"}}, "guaranteed", "limits.cpu: limits are not guaranteed"),
        ({"guaranteed": {GPU: "-3"}}, "guaranteed", "must be >= 0"),
        ({"guaranteed": {GPU: ""}}, f"guaranteed.{GPU}", "may not be blank"),
        ({"guaranteed": "16"}, "guaranteed", "dictionary"),
        ({"cohort": "Research!"}, "cohort", "a cohort name is"),
        ({"borrowing_limit": {GPU: "1"}}, "borrowing_limit", "not a guaranteed key"),
        ({"guaranteed": {GPU: "10"}, "gaurantee": {}}, "gaurantee", "unknown field"),
        ({"guaranteed": {GPU: "17"}}, "guaranteed", "would guarantee 17 nvidia.com/gpu in all (team-a 17)"),
    ],
)
def test_bad_patches_are_400_naming_the_field(staff_api, body, path, words):
    publish()
    response = staff_api.patch("/api/v1/namespaces/team-a/", body, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [e["path"] for e in errors] == [path] and words in errors[0]["message"], errors
    assert elastic_fields("team-a") == {"guaranteed": {}, "cohort": "", "borrowing_limit": {}}


def test_put_and_other_fields_are_not_offered(staff_api):
    assert staff_api.put("/api/v1/namespaces/team-a/", {"cohort": "x"}, format="json").status_code == 405
    response = staff_api.patch("/api/v1/namespaces/team-a/", {"weight": 5}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["path"] == "weight"


def test_jobs_show_borrowing_and_preemption(api, jobs):
    victim, preemptor, _ = jobs
    deadline = timezone.now()
    Job.objects.filter(pk=victim.pk).update(
        state=State.RUNNING, borrowing=True, preemptions=1, preempted_for=preemptor, preempt_at=deadline
    )
    shown = api.get(f"/api/v1/jobs/{victim.pk}/").json()
    assert shown["borrowing"] is True and shown["preemptions"] == 1
    assert shown["preempted_for"] == preemptor.pk and shown["preempted_by"] is None and shown["preempt_at"]
    plain = api.get(f"/api/v1/jobs/{preemptor.pk}/").json()
    assert (plain["borrowing"], plain["preemptions"], plain["preempted_for"], plain["preempt_at"]) == (
        False,
        0,
        None,
        None,
    )


def test_the_schema_documents_the_elastic_fields(staff_api):
    schema = staff_api.get("/api/v1/schema/?format=json").json()
    assert "patch" in schema["paths"]["/api/v1/namespaces/{name}/"]
    namespace = schema["components"]["schemas"]["Namespace"]["properties"]
    assert {"guaranteed", "cohort", "borrowing_limit", "quota"} <= set(namespace)
    job = schema["components"]["schemas"]["Job"]["properties"]
    assert {"borrowing", "preemptions", "preempted_for", "preempted_by", "preempt_at"} <= set(job)


# --- the pages ------------------------------------------------------------------------------


@pytest.fixture
def browser(client, alice):
    client.force_login(alice)
    return client


def test_quota_bars_show_guaranteed_borrowed_and_free(browser, elastic_team_a):
    page = browser.get("/ns/team-a/").content.decode()
    # GPU: 8 hard, 4 guaranteed (the mark at 50%), 5 used + 1 reserved: 4 within, 2 borrowed
    assert "5 used + 1 reserved of 8 · 2 free" in page
    assert '<strong class="borrowed">2 borrowed</strong>' in page and "4 guaranteed" in page
    assert 'class="bar-guarantee" style="left: 50.0%"' in page
    assert 'class="bar-used" style="width: 50.0%"' in page  # 4 of the 5 used are within the guarantee
    assert 'class="bar-borrowed" style="width: 25.0%"' in page
    # cpu: 6.5 used of 8 guaranteed, nothing borrowed
    assert "8 guaranteed · 1.5 of it free" in page  # (cores, as the rest of the bar)
    assert "cohort research" in page


def test_plain_namespaces_keep_plain_bars(browser, team_a):
    publish({"team-a": {"hard": {GPU: 8}, "used": {GPU: 4}, "reserved": {}}})
    page = browser.get("/ns/team-a/").content.decode()
    assert "4 used + 0 reserved of 8 · 4 free" in page
    assert "bar-guarantee" not in page and "guaranteed" not in page


def test_borrowing_and_leaving_badges_on_job_lists_and_the_job_page(browser, jobs):
    borrower, leaving, queued = jobs
    soon = timezone.now() + timezone.timedelta(minutes=2)
    Job.objects.filter(pk=borrower.pk).update(state=State.RUNNING, borrowing=True)
    Job.objects.filter(pk=leaving.pk).update(
        state=State.RUNNING, borrowing=True, preempted_for=queued, preempt_at=soon, preemptions=1
    )
    Job.objects.filter(pk=queued.pk).update(borrowing=True)  # stale: a queued job holds nothing
    listing = browser.get("/ns/team-a/").content.decode()
    running = listing[listing.index('id="running-table"') :]
    assert running.count('class="badge badge-borrowing"') == 2
    assert running.count('class="badge badge-preempting"') == 1 and "preempted, leaves in 1m" in running
    queue = listing[listing.index('id="queue-table"') : listing.index('id="running-table"')]
    assert "badge" not in queue

    page = browser.get(f"/jobs/{leaving.pk}/").content.decode()
    assert 'class="badge badge-borrowing"' in page and 'id="job-borrowing"' in page
    assert f'being preempted to make room for <a href="/jobs/{queued.pk}/">job {queued.pk}</a>' in page
    assert 'id="job-preemptions">1 time' in page
    plain = browser.get(f"/jobs/{queued.pk}/").content.decode()
    assert "badge-borrowing" not in plain and "job-preemption" not in plain


def test_preemption_events_link_the_other_job_in_both_timelines(browser, jobs, cycling):
    victim, preemptor, _ = jobs
    JobEvent.objects.create(
        job=victim, type="Preempting", actor="jobdash", message=f"to make room for job {preemptor.pk}; grace 30s"
    )
    JobEvent.objects.create(
        job=preemptor, type="Preempting", actor="jobdash", message=f"preempting job(s) {victim.pk} <for it>"
    )
    JobEvent.objects.create(
        job=victim, type="Preempted", actor="jobdash", message=f"suspended to make room for job {preemptor.pk}"
    )
    Job.objects.filter(pk=victim.pk).update(
        preemptions=1,
        preempted_by=preemptor,
        reason="Preempted",
        message=f"preempted to make room for job {preemptor.pk}; back in its place, ...",
    )
    page = browser.get(f"/jobs/{victim.pk}/").content.decode()
    link = f'<a href="/jobs/{preemptor.pk}/">{preemptor.pk}</a>'
    assert f"to make room for job {link}; grace 30s" in page and f"suspended to make room for job {link}" in page
    assert "Preempted: waiting again in its place" in page  # the reason in words, its message linked too
    assert f"preempted to make room for job {link}; back" in page
    assert f'last to make room for <a href="/jobs/{preemptor.pk}/">job {preemptor.pk}</a>' in page
    other = browser.get(f"/jobs/{preemptor.pk}/").content.decode()
    assert f'preempting job(s) <a href="/jobs/{victim.pk}/">{victim.pk}</a> &lt;for it&gt;' in other  # escaped


def test_cluster_page_and_api_count_borrowing_grace_and_preemptions(client, staff, staff_api, jobs, team_b):
    a0, a1, a2 = jobs
    services.set_elastic_quota(team_b, user=staff, guaranteed={GPU: "4"}, cohort="vision")
    Job.objects.filter(pk=a0.pk).update(state=State.RUNNING, borrowing=True, preemptions=2)
    Job.objects.filter(pk=a1.pk).update(
        state=State.RELEASED, borrowing=True, preempted_for=a2, preempt_at=timezone.now(), preemptions=1
    )
    Job.objects.filter(pk=a2.pk).update(preemptions=3)  # queued again after three preemptions
    elastic_part = staff_api.get("/api/v1/cluster/").json()["elastic"]
    assert elastic_part["totals"] == {"preemptions": 6, "borrowing": 2, "grace": 1}
    assert elastic_part["namespaces"] == [
        {"name": "team-a", "cohort": "", "guaranteed": {}, "preemptions": 6, "borrowing": 2, "grace": 1},
        {"name": "team-b", "cohort": "vision", "guaranteed": {GPU: "4"}, "preemptions": 0, "borrowing": 0, "grace": 0},
    ]
    client.force_login(staff)
    page = client.get("/cluster/").content.decode()
    assert "2 jobs borrowing now · 1 being preempted (in their grace period) · 6 preemptions in all" in page
    row = page[page.index('data-namespace="team-b"') :]
    assert "vision" in row and f"{GPU} 4" in row
