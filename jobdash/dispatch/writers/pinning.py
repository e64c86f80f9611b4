"""Phase 12 of a cycle, pin: every pod of a released job runs on the node the planner chose.

A pinned job's pod templates carry the gate queueing.placement.GATE (holding.py), so each
of its pods is created gated and nothing schedules it. Here each gated pod is matched to a
planned slot (placement.assign) and sent there: one patch names the node in its
nodeSelector and lifts the gate, and the scheduler binds it there. A pod its controller
makes again later (a restart) comes gated too, and goes back inside the plan.

Gangs that lost nodes (the plan's replacements, queueing/replacement.py) get their new
placement written first, and their pods on failed nodes deleted, so that their controllers
make them again, gated, for the new nodes; a gang that found no room is taken back and
queued again (the plan's evictions).

The patches go out without holding up the cycle (Pins): a pod is in flight from its patch
until the watch shows it ungated, and meanwhile it counts as on its node, so a later cycle
neither sends it again nor gives its slot to another pod. A patch that failed is sent again
by the next cycle. Waiting for them within the cycle cost the leader a sixth of its time in
Kueue's baseline (issue 47).
"""

import logging
import time
from collections.abc import Iterable, Mapping
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from jobdash import logs, metrics
from jobdash.cluster import devices, kinds
from jobdash.cluster import gateway as gw
from jobdash.cluster.devices import NodeCards
from jobdash.dispatch.phases.active import ActiveJob, cards_column
from jobdash.dispatch.state.cycle_cache import CycleCache
from jobdash.dispatch.writers import holding, replanned, transitions
from jobdash.dispatch.writers.release import Sending
from jobdash.jobs.models import State
from queueing import Plan
from queueing.cards import CardPlacement
from queueing.devices import MODELS
from queueing.placement import GATE, JobPod, assign, one_node_roles
from queueing.replacement import Placement, Replacement

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Replaced:
    """What phase 10 (replace) changed of the snapshot's placements: per gang placed anew, its
    placement now in force and its pods' shared cards (pin sends its pods there)."""

    placements: Mapping[int, Placement] = field(default_factory=dict)
    cards: Mapping[int, CardPlacement] = field(default_factory=dict)


def replace(
    gateway: gw.ClusterGateway,
    plan: Plan,
    active: list[ActiveJob],
    pods: Mapping[gw.ObjectKey, list[gw.PodInfo]],
    lost: Iterable[Replacement],
    failed_nodes: frozenset[str],
    *,
    mode: str,
    term: int | None,
    now: datetime | None = None,
) -> Replaced:
    """Write the plan's new placements of gangs that lost nodes (`lost`: the snapshot's
    account of what they lost) and take back those it evicts, and those whose lost pods
    cannot move: their template names the node (placement.one_node_roles)."""
    jobs = {job.id: job for job in active}
    slots = {replacement.job_id: replacement.lost for replacement in lost}
    evictions = dict(plan.evictions)
    moved: dict[int, Placement] = {}
    notes: dict[int, str] = {}
    for job_id, placement in plan.replacements.items():
        job = jobs.get(job_id)
        if job is None:
            continue
        before, after = {node for _, _, node in job.placement}, {node for _, _, node in placement}
        gone = ", ".join(sorted(before - after))
        if _made_for(job, slots.get(job_id, ())):
            evictions[job_id] = f"its node(s) {gone} failed or went, and its pods are made for them: queued again"
            continue
        moved[job_id] = placement
        notes[job_id] = (
            f"its node(s) {gone} failed or went: its pods there run again on {', '.join(sorted(after - before))}"
        )
    cards = {
        job_id: _moved_cards(jobs[job_id].cards, slots.get(job_id, ()), plan.cards.get(job_id, ())) for job_id in moved
    }
    written = set(transitions.replaced(dict(moved), notes, term, cards=cards_json(cards)))
    metrics.count_replacements(len(written))
    for job_id in written:
        job = jobs[job_id]
        for pod in _stranded(job, pods.get(job.key, ()), slots.get(job_id, ()), failed_nodes):
            gateway.delete_pod(pod.namespace, pod.name)  # its controller makes it again, gated
    for job_id, note in evictions.items():
        evicted = jobs.get(job_id)
        if evicted is not None and replanned.node_failed(job_id, note=note, term=term, now=now):
            try:
                holding.taken_back(gateway, evicted.key, mode, term)
            except gw.GatewayError as error:
                log.warning("taking back job %s: %s", job_id, error, extra=logs.job(job_id, evicted.namespace))
    return Replaced({job_id: moved[job_id] for job_id in written}, {job_id: cards[job_id] for job_id in written})


def _made_for(job: ActiveJob, lost: Placement) -> bool:
    """Whether a pod it lost is of a role whose template names its node: made again, it goes
    there again (a job released before templates named nodes may be counted in: taken back
    when it could have moved, never left waiting for a node that is gone)."""
    named = one_node_roles(job.workload, job.placement, job.cards)
    return any(role.lower() in named for role, _, _ in lost)


def _moved_cards(old: CardPlacement, lost: Placement, moved: CardPlacement) -> CardPlacement:
    """A replaced gang's cards: its kept pods' as they were, its lost pods' anew."""
    gone = {(role.lower(), index) for role, index, _ in lost}
    kept = [entry for entry in old if (entry[0].lower(), entry[1]) not in gone]
    return tuple(sorted((*kept, *moved)))


def cards_json(cards: Mapping[int, CardPlacement]) -> dict[int, list | None]:
    """Job.cards as stored, per job: None for a job with no pod on a shared card."""
    return {job_id: cards_column(found) for job_id, found in cards.items()}


def _stranded(
    job: ActiveJob, pods: Iterable[gw.PodInfo], lost: Placement, failed_nodes: frozenset[str]
) -> list[gw.PodInfo]:
    """The job's pods held by the slots it lost: on a failed node, or sent to a node that
    has no room for them any more (a pod's node, once chosen, cannot change)."""
    left: dict[tuple[str, str], int] = {}
    for role, _, node in lost:
        left[role.lower(), node] = left.get((role.lower(), node), 0) + 1
    roles = [ps.role for ps in job.workload.pod_sets]
    stranded = []
    for pod in sorted(pods, key=lambda p: p.node_name is not None):  # unbound ones first
        where = pod.node_name or pod.selected_node
        if where is None or pod.deleting or pod.terminated:
            continue
        key = (kinds.pod_role(job.kind_key, pod, roles).lower(), where)
        if left.get(key, 0) > 0 and (where in failed_nodes or pod.node_name is None):
            left[key] -= 1
            stranded.append(pod)
    return stranded


def released(sending: Sending, plan: Plan, cache: CycleCache) -> list[ActiveJob]:
    """This cycle's releases whose objects exist, as the pinning sees active jobs."""
    placed = {admission.job_id: admission.placement for admission in plan.admissions}
    counts = {admission.job_id: admission.counts for admission in plan.admissions if admission.counts}
    workloads = cache.workloads_of(sending.created)
    return [
        ActiveJob(
            job_id,
            sending.keys[job_id],
            kinds.display_name(sending.keys[job_id][0]),
            State.RELEASED,
            workloads[job_id].with_counts(counts[job_id]) if job_id in counts else workloads[job_id],
            placed.get(job_id) or (),
            plan.cards.get(job_id, ()),
        )
        for job_id in sending.created
        if job_id in workloads and job_id in sending.keys
    ]


PodKey = tuple[str, str, str]  # namespace, name, uid: a pod made again under its name is another


def _key(pod: gw.PodInfo) -> PodKey:
    return (pod.namespace, pod.name, pod.uid)


class Pins:
    """The pin patches in flight, kept by the Dispatcher from cycle to cycle."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool
        self._flying: dict[PodKey, tuple[str, Future]] = {}

    def __len__(self) -> int:
        return len(self._flying)

    def landed(self) -> int:
        """Forget the patches that failed (their pods are sent again) and return how many did."""
        errors = 0
        for key, (_, future) in list(self._flying.items()):
            if not future.done() or future.exception() is None:
                continue
            del self._flying[key]
            error = future.exception()
            if not isinstance(error, gw.NotFound):  # (gone meanwhile: its successor comes gated)
                errors += 1
                log.warning("sending a pod to its planned node: %s", error)
        return errors

    def node_of(self, pod: gw.PodInfo) -> str | None:
        """The node a gated pod was sent to, while its patch is in flight."""
        flight = self._flying.get(_key(pod))
        return flight[0] if flight is not None else None

    def send(self, gateway: gw.ClusterGateway, pod: gw.PodInfo, node: str, notes: dict[str, str]) -> None:
        self._flying[_key(pod)] = (node, self.pool.submit(gateway.ungate_pod, pod, GATE, node, notes))

    def keep(self, gated: set[PodKey]) -> None:
        """Only the flights of pods the watch still shows gated, or not yet answered."""
        for key, (_, future) in list(self._flying.items()):
            if key not in gated and future.done():
                del self._flying[key]

    def wait(self, timeout: float | None = None) -> None:
        """Until every patch in flight is answered (a test's, or a leader's last, cycle)."""
        futures.wait([future for _, future in self._flying.values()], timeout)


def pin(
    gateway: gw.ClusterGateway,
    active: list[ActiveJob],
    pins: Pins,
    placements: Mapping[int, Placement] | None = None,
    cards: Mapping[int, CardPlacement] | None = None,
    now: float | None = None,
    nodes: Iterable[gw.NodeInfo] | None = None,
) -> dict[str, int]:
    """Send each gated pod of the active jobs to its planned node, and on a node that
    shares its GPUs to its planned card (`placements`, `cards`: what this cycle replaced,
    over the snapshot's); their pods as the watch cache has them now, so that those made
    since the snapshot go at once. Pods beyond the plan stay gated: they run only once the
    job is admitted with them. Returns the patches sent, the pods beyond the plan, and the
    patches of earlier cycles that failed."""
    placements, cards = placements or {}, cards or {}
    now = time.time() if now is None else now
    errors = pins.landed()
    pods = gateway.pods_of_jobs(job.key for job in active if placements.get(job.id, job.placement))
    # (`nodes`: the snapshot's; a node's cards do not change between its phases)
    sharing = {node.name: node.cards for node in (gateway.nodes() if nodes is None else nodes) if node.cards}
    gated: set[PodKey] = set()
    sent = beyond = 0
    for job in active:
        planned = placements.get(job.id, job.placement)
        job_pods = pods.get(job.key, ())
        waiting = [pod for pod in job_pods if GATE in pod.gates]
        gated.update(_key(pod) for pod in waiting)
        if not planned or all(pins.node_of(pod) is not None for pod in waiting):
            continue
        roles = [ps.role for ps in job.workload.pod_sets]
        records = [_record(job, pod, roles, pins.node_of(pod)) for pod in job_pods]
        slot_cards = _slot_cards(planned, cards.get(job.id, job.cards), sharing)
        assignment = assign(planned, records, {key: ids for key, (_, ids) in slot_cards.items()})
        by_name = {pod.name: pod for pod in job_pods}
        for name, node in assignment.nodes.items():
            pod = by_name[name]
            role = kinds.pod_role(job.kind_key, pod, roles).lower()
            card = slot_cards.get((role, assignment.indexes[name]))
            pins.send(gateway, pod, node, _card_annotations(sharing, node, card, pod.requests, now))
            sent += 1
        beyond += len(assignment.unassigned)
    pins.keep(gated)
    return {"ungated": sent, "beyond-plan": beyond, "errors": errors}


def _record(job: ActiveJob, pod: gw.PodInfo, roles: list[str], flying_to: str | None) -> JobPod:
    """A pod as the assignment sees it: one whose patch is in flight is on its node already."""
    return JobPod(
        pod.name,
        kinds.pod_role(job.kind_key, pod, roles),
        gated=GATE in pod.gates and flying_to is None,
        node=pod.node_name or pod.selected_node or flying_to or "",
        cards=pod.cards,
        terminating=pod.deleting,
        ended=pod.terminated,
    )


def _slot_cards(
    planned: Placement, cards: CardPlacement, sharing: Mapping[str, NodeCards]
) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[str, ...]]]:
    """Per planned slot on a sharing node (lower-case role, index): its cards, by index and
    as its node names them."""
    nodes = {(role.lower(), index): node for role, index, node in planned}
    found = {}
    for role, index, chosen in cards:
        node = nodes.get((role.lower(), index))
        shared = sharing.get(node) if node is not None else None
        if shared is not None and all(card < len(shared.ids) for card in chosen):
            found[role.lower(), index] = (chosen, tuple(shared.ids[card] for card in chosen))
    return found


def _card_annotations(
    sharing: Mapping[str, NodeCards],
    node: str,
    card: tuple[tuple[int, ...], tuple[str, ...]] | None,
    requests: Mapping[str, int],
    now: float,
) -> dict[str, str]:
    """What pins a pod to its planned cards, as the device plugin's extender would write it."""
    shared = sharing.get(node)
    if shared is None or card is None:
        return {}
    demand = MODELS[shared.model].demand(requests, whole_card=max(shared.memory, default=0))
    if demand is None:
        return {}
    cores = requests.get(devices.HAMI_CORES, 0)
    return devices.pin_annotations(shared, card[0], demand[0], node, now, cores)


def off_plan(active: list[ActiveJob], pods: Mapping[gw.ObjectKey, list[gw.PodInfo]]) -> int:
    """Pods of the active jobs bound to nodes beyond what their placement plans there."""
    count = 0
    for job in active:
        if not job.placement:
            continue
        planned: dict[str, int] = {}
        for _, _, node in job.placement:
            planned[node] = planned.get(node, 0) + 1
        for pod in pods.get(job.key, ()):
            if pod.node_name and not pod.terminated and not pod.deleting:
                planned[pod.node_name] = planned.get(pod.node_name, 0) - 1
        count += sum(-left for left in planned.values() if left < 0)
    return count
