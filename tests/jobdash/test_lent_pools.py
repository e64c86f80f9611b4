"""Lent node pools (issue 35): their clock in the pool's time zone, and their declaration by
staff through the API and the console, a refusal naming the field and writing nothing."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobdash.jobs.lent import next_window, nightly_window, window
from jobdash.jobs.models import LentPool

from .conftest import token_client

BERLIN = ZoneInfo("Europe/Berlin")
NOTICE = timedelta(minutes=30)


def at(text: str, tz=BERLIN) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=tz)


def test_a_nightly_window_runs_from_its_start_to_its_end_the_next_morning_in_its_zone():
    start, end = time(22), time(8)
    assert nightly_window(start, end, BERLIN, at("2026-11-27 21:59"), NOTICE) is None
    evening = nightly_window(start, end, BERLIN, at("2026-11-27 22:00"), NOTICE)
    assert evening is not None
    assert (evening.lent_from, evening.reclaim_at) == (at("2026-11-27 22:00"), at("2026-11-28 08:00"))
    # after midnight it is still the window that began the evening before
    morning = nightly_window(start, end, BERLIN, at("2026-11-28 07:59"), NOTICE)
    assert morning == evening and morning.notice_from == at("2026-11-28 07:30")
    assert nightly_window(start, end, BERLIN, at("2026-11-28 08:00"), NOTICE) is None
    # a window within one day
    day = nightly_window(time(1), time(5), BERLIN, at("2026-11-28 03:00"), NOTICE)
    assert day is not None and day.reclaim_at == at("2026-11-28 05:00")


def test_the_night_the_clocks_change_is_as_long_as_the_wall_clock_says():
    # Europe/Berlin springs forward at 02:00 on 2026-03-29: 22:00 to 08:00 is nine hours that night.
    night = nightly_window(time(22), time(8), BERLIN, at("2026-03-29 03:30"), NOTICE)
    assert night is not None
    assert night.reclaim_at.astimezone(UTC) - night.lent_from.astimezone(UTC) == timedelta(hours=9)
    assert night.reclaim_at.astimezone(UTC) == datetime(2026, 3, 29, 6, 0, tzinfo=UTC)  # 08:00 CEST


def test_the_next_window_is_tonight_s_by_day_and_the_current_one_by_night():
    start, end = time(22), time(8)
    assert next_window(start, end, BERLIN, at("2026-11-27 12:00"), NOTICE).lent_from == at("2026-11-27 22:00")
    assert next_window(start, end, BERLIN, at("2026-11-27 23:00"), NOTICE).lent_from == at("2026-11-27 22:00")


def test_a_pool_lent_until_a_time_is_lent_until_then_and_a_disabled_pool_never():
    until = datetime(2026, 11, 28, 6, 0, tzinfo=UTC)
    pool = LentPool(name="spare", kind="until", until=until, notice_seconds=600)
    lent = window(pool, datetime(2026, 11, 27, 23, 0, tzinfo=UTC))
    assert lent is not None and lent.reclaim_at == until and lent.notice_from == until - timedelta(minutes=10)
    assert window(pool, until) is None
    pool.enabled = False
    assert window(pool, datetime(2026, 11, 27, 23, 0, tzinfo=UTC)) is None


NIGHT_A = {
    "name": "night-a",
    "node_selector": {"pool": "night-a"},
    "kind": "nightly",
    "start": "22:00",
    "end": "08:00",
    "timezone": "Europe/Berlin",
    "notice_seconds": 1800,
}


@pytest.mark.django_db
def test_staff_declare_a_pool_everyone_reads_it_with_its_lending(staff, user):
    admin, member = token_client(staff), token_client(user)
    created = admin.post("/api/v1/lent-pools/", NIGHT_A, format="json")
    assert created.status_code == 201, created.content
    body = member.get("/api/v1/lent-pools/night-a/").json()
    assert body["timezone"] == "Europe/Berlin" and body["start"] == "22:00:00"
    assert set(body["lending"]) == {"lent_now", "lent_from", "reclaim_at", "notice_from", "next_lent_from"}
    assert body["lending"]["lent_now"] or body["lending"]["next_lent_from"]
    changed = admin.patch("/api/v1/lent-pools/night-a/", {"notice_seconds": 600}, format="json")
    assert changed.status_code == 200 and LentPool.objects.get(name="night-a").notice_seconds == 600
    assert admin.delete("/api/v1/lent-pools/night-a/").status_code == 204
    assert not LentPool.objects.exists()


@pytest.mark.django_db
def test_members_may_not_declare_pools(user):
    refused = token_client(user).post("/api/v1/lent-pools/", NIGHT_A, format="json")
    assert refused.status_code == 403 and not LentPool.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"start": None}, "start"),
        ({"end": "22:00"}, "end"),
        ({"kind": "until"}, "until"),
        ({"node_selector": {}}, "node_selector"),
        ({"node_selector": {"pool": 3}}, "node_selector"),
        ({"name": "Night_A"}, "name"),
        ({"notice_seconds": -1}, "notice_seconds"),
        ({"start": "25:00"}, "start"),
    ],
)
def test_a_bad_pool_is_a_400_naming_the_field_and_writes_nothing(staff, change, path):
    refused = token_client(staff).post("/api/v1/lent-pools/", {**NIGHT_A, **change}, format="json")
    assert refused.status_code == 400, refused.content
    assert path in {problem["path"] for problem in refused.json()["errors"]}, refused.json()
    assert not LentPool.objects.exists()


@pytest.mark.django_db
def test_the_console_refuses_a_half_declared_pool_on_its_form(admin_client):
    form = {"name": "night-b", "node_selector": '{"pool": "night-b"}', "kind": "nightly", "timezone": "UTC"}
    form.update({"notice_seconds": "1800", "enabled": "on", "start": "22:00", "end": ""})
    answer = admin_client.post("/admin/jobs/lentpool/add/", form)
    assert answer.status_code == 200 and b"a nightly pool needs it" in answer.content
    assert not LentPool.objects.exists()
    form["end"] = "08:00"
    assert admin_client.post("/admin/jobs/lentpool/add/", form).status_code == 302
    assert LentPool.objects.get(name="night-b").end == time(8)
