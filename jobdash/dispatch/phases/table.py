"""The admission cycle as a table of phases (after Kueue's scheduler.schedule(): numbered
steps, each timed). PHASES is the one list of the phases' numbers, names (the keys of
Cycle.phases and the labels of jobdash_cycle_phase_seconds) and what each does; the
cycle's section of docs/architecture.md is drawn from it (markdown();
tests/jobdash/test_dispatch_phases.py checks the two agree, and shows the table to paste
when they do not). The driver (cycle.Dispatcher._cycle) runs the table by three rules:

- quiet: phase 0 found nothing a plan reads changed since a cycle whose plan did nothing;
  only the phases marked `quiet` run (the mirror and the events finish what they left);
- failed: after a phase raised, only the phases marked `finishing` run (the sends under
  way are waited for and recorded), then the error is raised: no Cycle row is written,
  and the next cycle plans again;
- stale: another cycle claimed after this one's snapshot (phase 6); the plan's
  admissions, preemptions and resizes are not carried out, the rest runs.

Each phase is a function of the CycleContext (context.py): it reads what the phases
before it left there and adds its own.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass

import queueing
from jobdash import metrics
from jobdash.dispatch.context import CycleContext
from jobdash.dispatch.phases import (
    clusters,
    lost,
    pod_groups,
    publish,
    reclaim,
    resize,
    snapshot_phase,
    statuses,
    workflow_holds,
)
from jobdash.dispatch.writers import pinning, preempt, transitions
from jobdash.dispatch.writers import release as release_phase
from jobdash.dispatch.writers.claims import Claim

log = logging.getLogger("jobdash.dispatch.cycle")  # (the cycle's log, wherever its phases live)


def _always(_ctx: CycleContext) -> bool:
    return True


@dataclass(frozen=True)
class Phase:
    number: int
    name: str  # the key of Cycle.phases, the label of jobdash_cycle_phase_seconds
    run: Callable[[CycleContext], None]
    does: str  # one line, for the docs
    quiet: bool = False  # runs in a quiet cycle too
    finishing: bool = False  # runs after an earlier phase failed
    timed: Callable[[CycleContext], bool] = _always  # its time recorded under its name

    def runs(self, ctx: CycleContext, *, failed: bool) -> bool:
        return (self.quiet or not ctx.quiet) and (self.finishing or not failed)


def quiet_look(ctx: CycleContext) -> None:
    leader = ctx.leader
    if leader.clusters is not None:  # (several clusters: their health first, phases/clusters.py)
        ctx.result.clusters = leader.clusters.check(ctx.term, ctx.started)
    elif not leader.one_cluster_recorded:  # (one cluster: none recorded from a run with several)
        clusters.forget_unconfigured()
        leader.one_cluster_recorded = True
    ctx.seen = leader.quiet.look(leader.gateway, ctx.term)
    ctx.quiet = leader.quiet.quiet(ctx.started.timestamp(), ctx.seen, leader.cache)
    if ctx.quiet:
        ctx.result.pending = leader.quiet.pending  # what the last full cycle saw
    else:
        leader.quiet.forget()


def take_snapshot(ctx: CycleContext) -> None:
    leader = ctx.leader
    ctx.claims = transitions.claims_seen()  # (before the snapshot: a claim after it makes it stale)
    tables = ctx.seen.tables if ctx.seen is not None else None
    frozen = leader.clusters.frozen if leader.clusters is not None else frozenset()
    ctx.world = snapshot_phase.read(
        leader.gateway, leader.cache, release_mode=leader.config.release_mode, tables=tables, frozen=frozen
    )


def expect_run_times(ctx: CycleContext) -> None:
    world = ctx.cloned
    ctx.expected = ctx.leader.cache.learning.expected(world.active, world.workloads_before, ctx.started.timestamp())


def account_lost(ctx: CycleContext) -> None:
    world = ctx.cloned
    ctx.lost = lost.account(world.active, world.pods, world.nodes, world.live_pods, pin=ctx.leader.config.pin)


def build_snapshot(ctx: CycleContext) -> None:
    leader, config = ctx.leader, ctx.leader.config
    assert ctx.expected is not None and ctx.lost is not None  # (phases 2 and 3)
    ctx.observation = snapshot_phase.build(
        leader.gateway,
        ctx.cloned,
        ctx.expected,
        ctx.lost,
        node_fit=config.node_fit,
        preemption_limit=config.preemption_limit,
        topology_levels=config.topology_levels,
        nodes_kept=leader.cache.nodes,
        now=ctx.started.timestamp(),
        team_usage=leader.team_usage,
        defrag=config.defrag,
        clusters=leader.clusters,
    )
    ctx.result.pending = len(ctx.observed.pending)


def make_plan(ctx: CycleContext) -> None:
    # Start times are forecast only in the complete rounds, those that write every status.
    ctx.complete = ctx.leader.complete_round_due(len(ctx.observed.pending))
    ctx.decision = queueing.plan(ctx.observed.snapshot, ctx.leader.policy, forecasts=ctx.complete)
    ctx.result.admitted = len(ctx.decision.admissions)


def release_claims(ctx: CycleContext) -> None:
    leader, config, decided = ctx.leader, ctx.leader.config, ctx.plan
    claims = [Claim.of(a, decided.cards.get(a.job_id, ())) for a in decided.admissions]
    try:
        ctx.sending = release_phase.start(
            leader.gateway,
            claims,
            term=ctx.term,
            mode=config.release_mode,
            concurrency=config.concurrency,
            backoff_seconds=config.backoff_s,
            seen=ctx.claims,
            now=ctx.started,
            pin=config.pin,
            workloads=leader.cache.workloads_of(claim.job_id for claim in claims),
        )
    except transitions.StaleSnapshot as error:
        log.info("cycle: released nothing, %s", error)
        ctx.result.skipped = True


def preempt_and_resize(ctx: CycleContext) -> None:
    leader, observed = ctx.leader, ctx.observed
    if not ctx.stale:  # (a stale plan's room was not released into: nobody leaves for it)
        _victims(ctx)
    lent = observed.snapshot.lent
    if lent:  # lent nodes going back: their jobs told, preempted at the reclaim (a notice, not the plan's)
        ctx.result.reclaim_notices = reclaim.mark(
            leader.gateway, lent, observed.active, now=observed.snapshot.now, term=ctx.term
        )


def _victims(ctx: CycleContext) -> None:
    """The plan's victims told to leave, the elastic ones to give back pods; the elastic
    jobs that grow into what nothing waiting can use, grown."""
    leader, observed, decided, result = ctx.leader, ctx.observed, ctx.plan, ctx.result
    grace_s = leader.config.preemption_grace_s
    if decided.preemptions:
        waiting = {row.job.id: (row.job.namespace, row.job.workload.name) for row in observed.pending}
        result.preempted = preempt.mark(
            leader.gateway,
            decided.preemptions,
            active=observed.active,
            waiting=waiting,
            grace_s=grace_s,
            max_notice_s=leader.config.max_notice_s,
            term=ctx.term,
            now=ctx.started,
        )
    if any(p.shrink_to for p in decided.preemptions):
        result.preempted += resize.mark(
            decided.preemptions, observed.active, grace_s=grace_s, term=ctx.term, now=ctx.started
        )
    if decided.resizes:
        result.grown = resize.grow(leader.gateway, decided.resizes, observed.active, term=ctx.term)


def write_back_statuses(ctx: CycleContext) -> None:
    leader, observed, learning = ctx.leader, ctx.observed, ctx.leader.cache.learning
    now = observed.snapshot.now
    statuses.write_statuses(
        observed.pending,
        ctx.plan,
        shifts=ctx.complete,
        forecasted=ctx.complete,
        ranges=learning.calibrator,
        forecasts=learning.forecasts,
        now=now,
        overruns=statuses.overruns(observed.active, now),
        cache=leader.cache,
    )
    if ctx.complete:
        leader.complete_round_done()


def track_active(ctx: CycleContext) -> None:
    # The jobs active at the snapshot (those released since, from the next cycle on); then
    # what an interrupted release left behind is repaired.
    leader, observed = ctx.leader, ctx.observed
    ctx.tracked = leader.track(
        ctx.term, observed.active, observed.active_pods, now=ctx.started, failed_nodes=observed.failed_nodes
    )
    pod_groups.fail_never_created(observed.never_created, ctx.term, ctx.started)
    workflow_holds.end(observed.never_met, ctx.term, ctx.started)  # never to be met, or too late
    ctx.result.repaired = leader.repair(ctx.term, ctx.started)


def replace_lost(ctx: CycleContext) -> None:
    observed = ctx.observed
    ctx.replaced = pinning.replace(
        ctx.leader.gateway,
        ctx.plan,
        observed.active,
        observed.active_pods,
        observed.snapshot.replacements,
        observed.failed_nodes,
        mode=ctx.leader.config.release_mode,
        term=ctx.term,
        now=ctx.started,
    )


def record_sent(ctx: CycleContext) -> None:
    if ctx.sending is not None:  # (None: phase 6 claimed nothing, or did not get that far)
        ctx.result.released = ctx.sending.finish()


def pin_pods(ctx: CycleContext) -> None:
    leader, observed = ctx.leader, ctx.observed
    if not leader.config.pin:
        return
    released = pinning.released(ctx.sending, ctx.plan, leader.cache) if ctx.sending is not None else []
    ctx.result.pinned = pinning.pin(
        leader.gateway,
        [*observed.active, *released],
        leader.pins,
        ctx.replaced.placements,
        ctx.replaced.cards,
        nodes=observed.node_infos,
    )


def publish_seen(ctx: CycleContext) -> None:
    observed = ctx.observed
    publish.observation(observed)
    metrics.set_off_plan(pinning.off_plan(observed.active, observed.active_pods))


def mirror_queue(ctx: CycleContext) -> None:
    out = ctx.leader.out
    ctx.turn = out.begin(ctx.started, changed=not ctx.quiet)
    out.mirror(
        ctx.leader.gateway, ctx.turn, term=ctx.term, concurrency=ctx.leader.config.concurrency, result=ctx.result
    )


def send_events(ctx: CycleContext) -> None:
    assert ctx.turn is not None  # (phase 14 began it)
    ctx.leader.out.events(ctx.leader.gateway, ctx.turn, concurrency=ctx.leader.config.concurrency, result=ctx.result)


def _quiet_only(ctx: CycleContext) -> bool:
    # A full cycle's look is timed with its snapshot, as it always was: a quiet cycle's is
    # most of what the cycle costs.
    return ctx.quiet


PHASES: tuple[Phase, ...] = (
    Phase(0, "quiet", quiet_look, "with several clusters, their health first (clusters.ClusterWatch: lost, back, jobs planned again); then whether nothing a plan reads changed since a cycle whose plan did nothing: phases 1 to 13 skipped (quiet.QuietWatch)", quiet=True, timed=_quiet_only),
    Phase(1, "snapshot", take_snapshot, "the world cloned: the job and namespace rows as the leader's cache keeps them, read only where they changed (world.refresh), and the watch cache (snapshot_phase.read -> World)"),
    Phase(2, "expect", expect_run_times, "the active jobs' run times expected, learning from what finished or started since (predictions.Learning.expected)"),
    Phase(3, "lost", account_lost, "the planned pods lost to failed or full nodes, and the failed nodes (lost.account)"),
    Phase(4, "build", build_snapshot, "queueing.Snapshot built of the world, the run times and the lost pods (snapshot_phase.build -> Observation)"),
    Phase(5, "plan", make_plan, "queueing.plan(): admissions, preemptions, resizes, and position/reason/start range for every other job"),
    Phase(6, "release", release_claims, "claimed under the leader's term (release.start); the objects are sent from the release threads while phases 7 to 10 run; a stale snapshot claims nothing"),
    Phase(7, "preempt", preempt_and_resize, "the plan's victims told to leave after their grace period (preempt.mark), elastic jobs shrunk or grown (resize), none after a stale snapshot; jobs on lent nodes told at their notice (reclaim.mark)"),
    Phase(8, "statuses", write_back_statuses, "position/reason/message/start range written back, only rows that changed (statuses.write_statuses)"),
    Phase(9, "track", track_active, "the active jobs moved on: running, finished, start timeout (tracker.track); stranded claims re-sent (reconcile); jobs of pods that never came failed"),
    Phase(10, "replace", replace_lost, "gangs that lost nodes get their new placement, or are queued again (pinning.replace)"),
    Phase(11, "sent", record_sent, "the outcomes of phase 6's sends recorded (release.Sending.finish), also when a phase before it failed", finishing=True),
    Phase(12, "pin", pin_pods, "every gated pod of the active jobs and of this cycle's releases sent to its planned node (pinning.pin)"),
    Phase(13, "publish", publish_seen, "the quotas, nodes and our pods' phases seen, for the web pages (publish.observation -> ClusterState)"),
    Phase(14, "mirror", mirror_queue, "each Queued job's QueuedJob object made, updated or deleted (mirror.sync; within the write budget, queue_out.py)", quiet=True),
    Phase(15, "events", send_events, "the outbox's state changes sent as Kubernetes Events (cluster_events.send; the same budget)", quiet=True),
)  # fmt: skip


def markdown() -> str:
    """The table as docs/architecture.md draws it."""
    lines = ["| # | phase | what it does | quiet cycle | after a failure |", "|---|---|---|---|---|"]
    for phase in PHASES:
        quiet = "runs" if phase.quiet else "skipped"
        failed = "runs" if phase.finishing else "skipped"
        lines.append(f"| {phase.number} | **{phase.name}** | {phase.does} | {quiet} | {failed} |")
    return "\n".join(lines)
