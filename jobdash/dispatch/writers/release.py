"""Phase 6 of a cycle: hand admitted jobs to the cluster, exactly once.

1. claim: Queued -> Released for all admissions in one transaction under the leader's
   term (transitions.claim); a job another cycle or a cancel got to first is skipped;
2. create the job's object (mode `create`) or unsuspend it (mode `unsuspend`),
   concurrently: its name is the job's own and it carries the job id, so a retry or a
   second leader lands on the same object instead of a duplicate;
3. record the outcome: the object's uid; or back to Queued (transient failures, quota
   refusals); or Failed with the cluster's message (permanent refusals).
A crash between 1 and 3 leaves Released rows without a uid, which reconcile finishes.
"""

import logging
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from jobdash import logs, metrics
from jobdash.cluster import gateway as gw
from jobdash.cluster import kinds
from jobdash.dispatch.phases import pod_groups
from jobdash.dispatch.writers import holding, replanned, transitions
from jobdash.dispatch.writers.claims import Claim
from jobdash.jobs.models import FINISHED_STATES, Job, State
from queueing import Workload, placement
from queueing.clusters import CLUSTER_LABEL

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    job_id: int
    uid: str = ""
    error: Exception | None = None


def object_manifest(parsed: dict, namespace: str, cluster: str = "") -> dict:
    """The object to create: the manifest in its namespace, and with several clusters naming
    the one it goes to (jobdash.io/cluster: the gateway creates it there, multi.py)."""
    manifest = dict(parsed)
    metadata = {**(parsed.get("metadata") or {}), "namespace": namespace}
    if cluster:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), CLUSTER_LABEL: cluster}
    manifest["metadata"] = metadata
    return manifest


def send(
    gateway: gw.ClusterGateway,
    job_id: int,
    key: gw.ObjectKey,
    manifest: dict,
    mode: str,
    term: int | None = None,
    pinned: Workload | None = None,
    scale: Mapping[str, int] | None = None,
    nodes: Mapping[str, str] | None = None,
) -> Outcome:
    """One job to the cluster, stamped with the leader's term (the webhook refuses a
    deposed leader's); `pinned`: its workload, when its pods are to wait for their planned
    nodes (its templates gated, or, for the roles `nodes` names, naming their one node).
    Runs in a worker thread: no database access here."""
    try:
        if kinds.objects_are_pods(key[0]):  # its pods exist, gated: nothing to create
            return Outcome(job_id, pod_groups.released(gateway, key, job_id, pinned is not None).uid)
        if mode == "unsuspend":
            check = getattr(gateway, "check_held_in", None)  # (several clusters: multi.py)
            if check is not None:
                check(key, (manifest.get("metadata", {}).get("annotations") or {}).get(CLUSTER_LABEL, ""))
            try:
                return Outcome(job_id, holding.unsuspended(gateway, key, job_id, pinned, term, scale, nodes).uid)
            except gw.NotFound:
                pass  # submitted through jobdash, not the webhook: nothing to unsuspend, create it
        return Outcome(job_id, holding.created(gateway, job_id, manifest, pinned, term, scale, nodes).uid)
    except gw.GatewayError as error:
        return Outcome(job_id, error=error)


def record(outcome: Outcome, *, backoff_seconds: float, term: int | None = None, now: datetime | None = None) -> str:
    """Write one outcome; returns what happened: created | requeued | failed | fenced."""
    error = outcome.error
    if error is None:
        transitions.created(outcome.job_id, outcome.uid)
        return "created"
    if isinstance(error, gw.Fenced):
        return "fenced"  # deposed: the newer leader owns this job now; write nothing
    if isinstance(error, gw.ElsewhereHeld):  # queued again at once, to go back where its object is
        replanned.held_elsewhere(outcome.job_id, error.cluster, term=term, now=now)
        return "requeued"
    if isinstance(error, (gw.Transient, gw.QuotaExceeded, gw.Conflict)):
        note = f"the cluster refused for now ({error.__class__.__name__}: {error}); retrying after a backoff"
        transitions.requeue(
            outcome.job_id,
            note=note,
            backoff_until=transitions.backoff(backoff_seconds, 0, now=now),
            count_attempt=False,
            term=term,
            now=now,
        )
        return "requeued"
    message = f"the cluster refused the job's object: {error}"
    transitions.fail(outcome.job_id, message, from_states=(State.RELEASED,), term=term, now=now, event="Refused")
    return "failed"


def start(
    gateway: gw.ClusterGateway,
    claims: Iterable[Claim],
    *,
    term: int,
    mode: str,
    concurrency: int,
    backoff_seconds: float,
    seen: int | None = None,
    now: datetime | None = None,
    pin: bool = False,
    workloads: Mapping[int, Workload] | None = None,
) -> "Sending":
    """Step 1 now, steps 2 and 3 under way: the cycle goes on with its other phases while
    the cluster creates the objects, and calls finish() at its end. (The claim is committed
    before anything is sent: a crash before finish() leaves claims that reconcile finishes.)"""
    claimed = transitions.claim(claims, term, seen=seen, now=now)
    metrics.observe_released(claimed)
    return start_sending(
        gateway,
        claimed,
        mode=mode,
        concurrency=concurrency,
        backoff_seconds=backoff_seconds,
        term=term,
        metered=True,
        now=now,
        pin=pin,
        workloads=workloads,
    )


def replace_finished_namesakes(gateway: gw.ClusterGateway, keys: dict[int, gw.ObjectKey], term: int | None) -> int:
    """A finished job's object keeps its name in the cluster until someone removes it (its
    pods' logs stay readable meanwhile). A new job of that name replaces it: the old object
    is deleted (fenced, like every write of ours) before the new one is created; an object
    still going away makes the create a transient refusal, retried after a backoff.
    Objects jobdash did not create, and those of active jobs, are left alone."""
    holders: dict[gw.ObjectKey, int] = {}
    for job_id, key in keys.items():
        found = gateway.job_object(key)
        if found is not None and found.job_id is not None and found.job_id != job_id and not found.deleting:
            holders[key] = found.job_id
    if not holders:
        return 0
    finished = set(Job.objects.filter(pk__in=holders.values(), state__in=FINISHED_STATES).values_list("id", flat=True))
    replaced = [key for key, holder in holders.items() if holder in finished]
    for key in replaced:
        gateway.delete_job_object(key, term)
    return len(replaced)


_pools: dict[tuple[int, str], ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def sending_pool(concurrency: int, purpose: str = "release") -> ThreadPoolExecutor:
    """The sending threads, kept from cycle to cycle: starting sixteen threads for each
    cycle's releases cost a twentieth of a busy dispatcher's time. `purpose`: writes that
    outlive a cycle (the pins) have threads of their own, so a cycle's releases never
    queue behind them."""
    with _pools_lock:
        pool = _pools.get((concurrency, purpose))
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=purpose)
            _pools[concurrency, purpose] = pool
        return pool


def start_sending(
    gateway: gw.ClusterGateway,
    job_ids: list[int],
    *,
    mode: str,
    concurrency: int,
    backoff_seconds: float,
    term: int | None = None,
    metered: bool = False,
    now: datetime | None = None,
    pin: bool = False,
    workloads: Mapping[int, Workload] | None = None,
) -> "Sending":
    """Step 2 started for claimed (Released) jobs: their objects are sent from the release
    threads; Sending.finish() waits for them and records the outcomes (step 3). `metered`:
    counted in jobdash_releases_total (a cycle's releases, not reconcile's resends). `pin`:
    the pods of a job with a placement wait for their planned nodes (`workloads`: the
    jobs' parsed workloads at hand; others are read)."""
    if not job_ids:
        return Sending([], {}, backoff_seconds, term, metered, now)
    workloads = workloads or {}
    fields = ["id", "parsed", "kind_key", "namespace__name", "name", "preemptions", "placement", "scale", "cards"]
    fields.append("cluster")
    rows = list(Job.objects.filter(pk__in=job_ids).values_list(*fields))
    unparsed = [row[0] for row in rows if pin and row[6] and row[0] not in workloads]
    if unparsed:
        parsed_now = Job.objects.filter(pk__in=unparsed).values_list("id", "workload")
        workloads = {**workloads, **{job_id: Workload.from_json(data) for job_id, data in parsed_now}}
    manifests, keys, modes, pinned, scales, nodes = {}, {}, {}, {}, {}, {}
    for job_id, parsed, kind_key, namespace, name, preemptions, planned, scale, cards, cluster in rows:
        scales[job_id] = scale
        manifests[job_id] = object_manifest(parsed, namespace, cluster)
        keys[job_id] = (kind_key, namespace, name)
        # A preempted job's object is still there, suspended: it resumes (from its checkpoint).
        modes[job_id] = "unsuspend" if preemptions else mode
        pinned[job_id] = workloads.get(job_id) if pin and planned else None
        held = pinned[job_id]
        nodes[job_id] = placement.one_node_roles(held, planned, cards or ()) if held is not None else None
    replace_finished_namesakes(gateway, keys, term)
    pool = sending_pool(max(1, concurrency))
    futures = [
        pool.submit(
            send,
            gateway,
            job_id,
            keys[job_id],
            manifests[job_id],
            modes[job_id],
            term,
            pinned[job_id],
            scales[job_id],
            nodes[job_id],
        )
        for job_id in job_ids
    ]
    return Sending(futures, keys, backoff_seconds, term, metered, now)


@dataclass
class Sending:
    """Releases on their way to the cluster."""

    futures: list[Future]
    keys: dict[int, gw.ObjectKey]
    backoff_seconds: float
    term: int | None
    metered: bool
    now: datetime | None = None  # the cycle's: a refusal's backoff counts from it
    created: list[int] = field(default_factory=list)  # the jobs whose objects exist now (after finish)

    def finish(self) -> dict[str, int]:
        """Wait for every send; record the outcomes: the created objects' uids in one
        statement, each refusal on its own. Returns the count of each outcome."""
        outcomes = [future.result() for future in self.futures]
        counts: dict[str, int] = {}
        # The usual outcome, a created object, is recorded for all jobs in one statement.
        uids = {outcome.job_id: outcome.uid for outcome in outcomes if outcome.error is None}
        transitions.created_many(uids)
        self.created = list(uids)
        if uids:
            counts["created"] = len(uids)
        for outcome in outcomes:
            if outcome.error is None:
                continue
            result = record(outcome, backoff_seconds=self.backoff_seconds, term=self.term, now=self.now)
            counts[result] = counts.get(result, 0) + 1
            log.warning(
                "release of job %s: %s",
                outcome.job_id,
                outcome.error,
                extra=logs.job(outcome.job_id, (self.keys.get(outcome.job_id) or ("", "", ""))[1]),
            )
        if self.metered:
            metrics.count_releases(counts)
        return counts
