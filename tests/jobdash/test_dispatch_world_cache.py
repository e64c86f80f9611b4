"""What the leader keeps of the database between cycles (state/world.py: the queued jobs,
the active jobs and the Namespace rows, kept from one feed a cycle) is what a rebuild from
nothing reads: after random sequences of writes to real rows, the kept view, refreshed,
equals the view a new cache makes. As the node pool's memo is checked
(test_dispatch_node_cache.py).

A row deleted outright leaves no stamp for the feed: the kept view holds it until the next
full read (FULL_READ_EVERY_S), and then equals the rebuild exactly."""

from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobdash.dispatch.state import cycle_cache, world
from jobdash.dispatch.state.cycle_cache import CycleCache
from jobdash.dispatch.state.quiet import _tables_version
from jobdash.jobs import services
from jobdash.jobs.models import Job, Namespace, State

from .dispatch_support import manifest

pytestmark = pytest.mark.django_db(transaction=True)

NAMESPACES = ("team-a", "team-b")
ACTIVE = (State.RELEASED, State.RUNNING)

job = st.integers(0, 1_000)  # which of the rows there are (modulo their number)
events = st.lists(
    st.one_of(
        # (submissions and cycles twice as likely as the other writes: rows to move, looks at them)
        st.tuples(st.just("submit"), st.sampled_from(NAMESPACES), st.integers(1, 3)),
        st.tuples(st.just("submit"), st.sampled_from(NAMESPACES), st.integers(1, 3)),
        st.just(("cycle",)),
        st.tuples(st.just("claim"), job, st.booleans()),  # (and whether it was admitted scaled down)
        st.tuples(st.just("run"), job),
        st.tuples(st.just("finish"), job, st.sampled_from((State.SUCCEEDED, State.FAILED))),
        st.tuples(st.just("requeue"), job),
        st.tuples(st.just("priority"), job, st.integers(0, 5)),
        st.tuples(st.just("delete"), job),
        st.tuples(st.just("namespace"), st.sampled_from(NAMESPACES), st.integers(1, 4), st.sampled_from(("", "fifo"))),
        st.just(("full",)),  # the next refresh reads every row's version
        st.just(("cycle",)),
    ),
    min_size=1,
    max_size=20,
)
# A life of each kind, so that every example run covers them (hypothesis adds random ones).
LIVES = [
    ("submit", "team-a", 2), ("submit", "team-b", 1), ("cycle",), ("claim", 0, True), ("cycle",),
    ("run", 0), ("priority", 0, 3), ("cycle",), ("claim", 0, False), ("namespace", "team-a", 2, "fifo"), ("cycle",),
    ("finish", 0, State.SUCCEEDED), ("cycle",), ("requeue", 0), ("cycle",), ("claim", 0, False), ("cycle",),
    ("delete", 0), ("cycle",), ("full",), ("cycle",),
]  # fmt: skip


def view(kept: world.Kept) -> tuple[dict, dict, list]:
    return (
        {job.id: job for job in kept.active},
        {row.job.id: row for row in kept.rows},
        sorted((dict(row) for row in kept.namespaces), key=lambda row: row["name"]),
    )


class Rows:
    """The events, written as the leader's and the users' writes leave the rows."""

    def __init__(self, user) -> None:
        self.user = user
        self.count = 0

    def pick(self, index: int, *states: str) -> Job | None:
        rows = Job.objects.filter(state__in=states) if states else Job.objects.all()
        ids = sorted(rows.values_list("id", flat=True))
        return Job.objects.get(pk=ids[index % len(ids)]) if ids else None

    def apply(self, event: tuple) -> int | None:
        """Writes `event`; the id of a row it deleted."""
        now = timezone.now()
        match event:
            case ("submit", namespace, workers):
                self.count += 1
                text = manifest(f"job-{self.count}", workers=workers, namespace=namespace)
                services.job_submit(user=self.user, manifest=text, source="api")
            case ("claim", index, scaled) if (row := self.pick(index, State.QUEUED)) is not None:
                placement = [["Worker", 0, "node-0"]]
                scale = {"Worker": 1} if scaled else None
                Job.objects.filter(pk=row.pk).update(
                    state=State.RELEASED, released_at=now, placement=placement, scale=scale, position=None
                )
            case ("run", index) if (row := self.pick(index, State.RELEASED)) is not None:
                Job.objects.filter(pk=row.pk).update(state=State.RUNNING, started_at=now + timedelta(seconds=1))
            case ("finish", index, state) if (row := self.pick(index, *ACTIVE)) is not None:
                Job.objects.filter(pk=row.pk).update(state=state, finished_at=now)
            case ("requeue", index) if (row := self.pick(index, *ACTIVE)) is not None:
                Job.objects.filter(pk=row.pk).update(
                    state=State.QUEUED, released_at=None, started_at=None, placement=None, scale=None
                )
            case ("priority", index, priority) if (row := self.pick(index)) is not None:
                Job.objects.filter(pk=row.pk).update(priority=priority)
            case ("delete", index) if (row := self.pick(index)) is not None:
                Job.objects.filter(pk=row.pk).delete()
                return row.pk
            case ("namespace", name, weight, policy):
                Namespace.objects.filter(name=name).update(weight=weight, policy=policy)
        return None


def _check(user, sequence) -> None:
    Job.objects.all().delete()  # (the database outlives hypothesis' examples)
    Namespace.objects.update(weight=1, policy="")
    rows, cache = Rows(user), CycleCache()
    deleted: set[int] = set()  # since the kept view's last full read
    last: dict = {}

    def refresh(cache: CycleCache) -> world.Kept:
        return world.refresh(cache, release_mode="create", tables=_tables_version())

    for event in [*sequence, ("cycle",)]:
        if event == ("full",):
            cache.full_read_at = float("-inf")
            continue
        if event != ("cycle",):
            gone = rows.apply(event)
            if gone is not None:
                deleted.add(gone)
            last = {}  # (something may have changed: no ActiveJob need be the same object)
            continue
        full = cache.horizon is None or cycle_cache.FULL_READ_EVERY_S <= 0 or cache.full_read_at == float("-inf")
        active, pending, namespaces = view(refresh(cache))
        if full:
            deleted.clear()
        rebuilt_active, rebuilt_pending, rebuilt_namespaces = view(refresh(CycleCache()))
        # Only rows deleted outright since the last full read may be kept beyond the rebuild.
        assert active.keys() - rebuilt_active.keys() <= deleted
        assert pending.keys() - rebuilt_pending.keys() <= deleted
        assert {i: j for i, j in active.items() if i not in deleted} == rebuilt_active
        assert {i: row for i, row in pending.items() if i not in deleted} == rebuilt_pending
        assert namespaces == rebuilt_namespaces
        # A cycle after one that saw no write reuses every ActiveJob, the very objects.
        assert all(last[i] is j for i, j in active.items() if i in last)
        last = active


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=events)
@example(sequence=LIVES)
def test_the_kept_world_is_the_world_a_rebuild_reads(user, sequence):
    _check(user, sequence)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=events)
@example(sequence=LIVES)
def test_with_every_read_a_full_one_the_kept_world_is_exactly_the_rebuild(user, sequence, monkeypatch):
    monkeypatch.setattr(cycle_cache, "FULL_READ_EVERY_S", 0.0)
    _check(user, sequence)
