"""The cycle as its table of phases (dispatch/phases/table.py): the table is the one list of the
phases' numbers and names, the docs draw it, and the driver runs it by its three rules
(quiet, failed, stale)."""

import re
from pathlib import Path

import pytest

from jobdash.dispatch import cycle
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.phases import table
from jobdash.dispatch.phases.table import PHASES, Phase
from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.models import Cycle, Job, State

from .dispatch_support import manifest, settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def cycle_section() -> str:
    text = DOCS.read_text()
    start = text.index("## The admission cycle (`dispatch/cycle.py`)")
    return text[start : text.index("\n## ", start + 1)]


def test_the_phases_are_numbered_in_order_and_named_once():
    assert [phase.number for phase in PHASES] == list(range(len(PHASES)))
    assert len({phase.name for phase in PHASES}) == len(PHASES)


def test_the_docs_draw_the_table():
    assert table.markdown() in cycle_section(), "paste table.markdown() into the cycle's section:\n" + table.markdown()


def test_the_docs_detail_every_phase_in_the_tables_order():
    detailed = re.findall(r"^(\d+)\. \*\*(\w+)\*\*", cycle_section(), re.MULTILINE)
    assert [(int(number), name) for number, name in detailed] == [(p.number, p.name) for p in PHASES]


def test_the_drivers_docstring_lists_the_table():
    listed = re.findall(r"(\d+) (\w+)", (cycle.__doc__ or "").split("\n\n")[1])
    assert [(int(number), name) for number, name in listed] == [(p.number, p.name) for p in PHASES]


def _table(ran: list[str], *, quiet: bool = False, failing: tuple[str, ...] = ()) -> tuple[Phase, ...]:
    """Stand-ins for the real phases, keeping their rules: each notes that it ran, the first
    makes the cycle quiet if asked, those in `failing` raise."""

    def step(phase: Phase):
        def run(ctx) -> None:
            ran.append(phase.name)
            if phase.number == 0:
                ctx.quiet = quiet
            if phase.name in failing:
                raise RuntimeError(phase.name)

        return run

    return tuple(
        Phase(p.number, p.name, step(p), p.does, quiet=p.quiet, finishing=p.finishing, timed=p.timed) for p in PHASES
    )


def test_after_a_failure_only_the_finishing_phases_run_then_the_error_is_raised(monkeypatch):
    ran: list[str] = []
    monkeypatch.setattr(table, "PHASES", _table(ran, failing=("statuses",)))
    with pytest.raises(RuntimeError, match="statuses"):
        Dispatcher(gateway=None, config=settings()).cycle(1)
    assert ran == ["quiet", "snapshot", "expect", "lost", "build", "plan", "release", "preempt", "statuses", "sent"]


def test_a_finishing_phase_that_fails_too_raises_its_error_with_the_first_as_its_context(monkeypatch):
    ran: list[str] = []
    monkeypatch.setattr(table, "PHASES", _table(ran, failing=("track", "sent")))
    with pytest.raises(RuntimeError, match="sent") as raised:
        Dispatcher(gateway=None, config=settings()).cycle(1)
    assert str(raised.value.__context__) == "track"


@pytest.mark.django_db
def test_a_quiet_cycle_runs_the_quiet_phases_and_records_them(monkeypatch):
    ran: list[str] = []
    monkeypatch.setattr(table, "PHASES", _table(ran, quiet=True))
    result = Dispatcher(gateway=None, config=settings()).cycle(1)
    quiet = [phase.name for phase in PHASES if phase.quiet]
    assert ran == quiet and list(result.phases) == quiet
    assert set(Cycle.objects.get().phases) == set(quiet)  # (jsonb keeps no order)


@pytest.mark.django_db(transaction=True)
def test_a_stale_snapshot_releases_nothing_and_the_rest_of_the_cycle_runs(user, gateway, term, monkeypatch):
    job = services.job_submit(user=user, manifest=manifest("fits", cpu="1"), source="api")
    seen = transitions.claims_seen()
    monkeypatch.setattr(transitions, "claims_seen", lambda: seen - 1)  # as if another cycle claimed since
    result = Dispatcher(gateway, settings()).cycle(term)
    assert result.skipped and result.admitted == 1 and result.released == {}
    assert Job.objects.get(pk=job.pk).state == State.QUEUED
    assert list(result.phases) == [phase.name for phase in PHASES if phase.name != "quiet"]
    monkeypatch.undo()
    Dispatcher(gateway, settings()).cycle(term)  # the next plans again, and releases it
    assert Job.objects.get(pk=job.pk).state == State.RELEASED
