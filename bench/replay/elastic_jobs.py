"""Elastic jobs in the replay (issue 35, ``ReplayConfig.elastic``), as the dispatcher runs them.

A share of the trace's multi-GPU jobs, the same in every replay of a window (by a hash of
the job id), are elastic PyTorchJobs: one 1-GPU Worker per GPU, ``elasticPolicy``
minReplicas half of them (at least one) and maxReplicas all (mapping.pytorchjob_manifest).
Everything goes through kubesim's API and its training operator, which makes or removes
the Workers when their replicas change (the adapter's ``scale_patch``, as
dispatch/phases/resize.py):

- a partial admission (``Admission.counts``) creates the job with that many Workers;
- growth (``Plan.resizes``) scales a running job up, its new pods held by the placement
  gate and sent to their planned nodes like any release's;
- at a lent pool's reclaim, a job whose pods there are its highest-numbered Workers and
  whose count without them stays at its minimum or above gives them back and runs on (the
  rule of dispatch/phases/reclaim.py ``extras_on``); any other job there is preempted as before.

Run time: an elastic job's work is the trace's duration x its GPUs (Worker-seconds), done
at one Worker-second per running Worker per second: with fewer Workers it runs
proportionally longer, with more shorter.  kubesim's work clock times a run once, from the
``kubesim.io/duration-seconds`` annotation, when its gang forms, and keeps the work up to
the last checkpoint when the gang breaks.  So the replay sets the annotation before each
run starts (a release, a resume, and a growth: new Workers break the gang until they run,
as torch elastic restarts its workers from the last checkpoint when one joins) to the
work left at the new size; a shrink leaves the gang whole, and kubesim has no way to be
told its run now ends later, so the replay moves the run's end itself (``_retime``: the
one write to kubesim's internals, reported as a change kubesim should make).
"""

from __future__ import annotations

import dataclasses
import zlib

from kubesim.api import SYSTEM
from queueing import capabilities
from queueing.workload import adapter_for

from .mapping import DURATION_ANNOTATION, elastic_minimum, job_name, pytorchjob_manifest
from .records import RUNNING, JobRecord
from .trace import TraceJob

PYTORCH_ADAPTER = adapter_for("kubeflow.org/v1", "PyTorchJob")
MERGE = "application/merge-patch+json"
ROLE = "Worker"
_BUCKETS = 10_000


def picked(job_id: int, share: float) -> bool:
    """Whether job ``job_id`` is one of the ``share`` made elastic (the same in every replay)."""
    return zlib.crc32(str(job_id).encode()) % _BUCKETS < share * _BUCKETS


def work_done(segments: list[tuple[float, int]], until: float) -> float:
    """Worker-seconds run from the first segment's start to ``until``."""
    done = 0.0
    for number, (since, workers) in enumerate(segments):
        end = segments[number + 1][0] if number + 1 < len(segments) else until
        done += workers * max(0.0, min(end, until) - since)
    return done


class ElasticJobs:
    """Mixed into ``engine.Replay``; ``_init_elastic`` sets its state."""

    def _init_elastic(self) -> None:
        self.elastic_ids: set[int] = set()  # the trace's jobs run as elastic ones
        self.grown_jobs: set[int] = set()
        self.reclaim_shrunk: set[int] = set()  # jobs a reclaim shrank instead of preempting
        self.stats.update(
            elastic_share=self.config.elastic,
            elastic_jobs=0,
            elastic_partial_admissions=0,
            elastic_grows=0,
            elastic_grown_jobs=0,
            elastic_grown_gpu_s=0.0,  # GPU-s of running Workers above the count admitted
            elastic_lent_extra_gpu_s=0.0,  # ... of them on lent nodes
            elastic_restart_lost_gpu_s=0.0,  # work since the last checkpoint lost when a Worker joined
            elastic_shrinks=0,
            reclaim_shrinks=0,
            reclaim_shrunk_jobs=0,
        )

    def _is_elastic(self, job: TraceJob) -> bool:
        elastic = self.config.elastic > 0 and job.gpus > 1 and picked(job.id, self.config.elastic)
        if elastic:
            self.elastic_ids.add(job.id)
            self.stats["elastic_jobs"] = len(self.elastic_ids)
        return elastic

    def _may_grow(self) -> bool:
        """Some running elastic job is below its maximum (a cycle may grow it)."""
        return bool(self.elastic_ids) and any(
            job.elastic and job.counts[ROLE] < job.workload.counts[ROLE] for job in self.running.values()
        )

    def _key(self, rec: JobRecord) -> tuple[str, str, str]:
        return (rec.kind.plural, rec.job.vc, job_name(rec.job.id))

    # -- release --------------------------------------------------------------------------------

    def _elastic_create(self, rec: JobRecord, counts, pin: bool) -> None:
        """Created (or resumed) with the Workers admitted, its annotation the work left at that size."""
        workers = (counts or {}).get(ROLE, rec.job.gpus)
        if workers < rec.job.gpus:
            self.stats["elastic_partial_admissions"] += 1
        rec.gang = rec.admitted = workers
        rec.gpus = workers * rec.per_pod_gpus
        rec.placement = tuple(slot for slot in rec.placement if slot[1] < workers)
        duration = rec.kept_s + rec.work_left / workers
        if rec.suspended:  # its PyTorchJob is there, suspended: resized, then resumed
            if pin:
                self._hold_object(rec)
            body = {"metadata": {"annotations": {DURATION_ANNOTATION: repr(duration)}}}
            self.cluster.api.patch(rec.kind, rec.job.vc, job_name(rec.job.id), MERGE, body)
            self._scale_object(rec, workers)
            self._set_suspend(rec, False)
            return
        manifest = pytorchjob_manifest(
            rec.job.id, rec.job.vc, rec.job.gpus, duration, workers, self._object_annotations(rec)
        )
        self.cluster.create(self._held(manifest, rec) if pin else manifest)

    def _elastic_deleted(self, rec: JobRecord) -> None:
        """Its object deleted (a start timeout): kubesim keeps nothing of it, all its work is left."""
        rec.work_left = rec.job.duration * rec.job.gpus
        rec.kept_s = 0.0
        rec.segments = None

    def _scale_object(self, rec: JobRecord, workers: int) -> None:
        assert PYTORCH_ADAPTER is not None
        self.cluster.api.update_with(
            rec.kind,
            rec.job.vc,
            job_name(rec.job.id),
            lambda obj: capabilities.scaled(PYTORCH_ADAPTER, obj, {ROLE: workers}),
            SYSTEM,
            False,
            "",
        )

    # -- kubesim's runs -------------------------------------------------------------------------

    def _elastic_pods(self, rec: JobRecord, now: float) -> None:
        """A pod of a running elastic job changed: its run starts again once its gang is whole,
        and its extra Workers are counted."""
        if rec.state == RUNNING and rec.segments is None and rec.n_running >= rec.gang:
            self._elastic_run(rec, now)
        self._extras(rec, now)

    def _elastic_run(self, rec: JobRecord, now: float) -> None:
        """kubesim's gang formed: a run of ``rec.gang`` Workers starts."""
        rec.segments = [(now, rec.gang)]
        rec.kept_s = self.cluster.work.progress(self._key(rec))[0]

    def _fold(self, rec: JobRecord, now: float) -> None:
        """kubesim's run stopped (suspended, or a Worker joined): the work it kept (up to its
        last checkpoint) is done, the rest of the run's is lost."""
        if rec.segments is None:
            return
        kept, since = self.cluster.work.progress(self._key(rec))
        if since is not None:  # (still running: nothing stopped)
            return
        saved = work_done(rec.segments, rec.segments[0][0] + (kept - rec.kept_s))
        run = work_done(rec.segments, now)
        self.stats["elastic_restart_lost_gpu_s"] += max(0.0, run - saved) * rec.per_pod_gpus * (rec.state == RUNNING)
        rec.work_left = max(0.0, rec.work_left - saved)
        rec.kept_s = kept
        rec.segments = None

    def _retime(self, rec: JobRecord, end: float) -> None:
        """kubesim's current run of the job ends at ``end`` (its work clock times a run once,
        when its gang forms; a shrink keeps the gang whole)."""
        work = self.cluster.work
        key = self._key(rec)
        with work._lock:
            if key in work._timers:
                work._timers[key] = end

    def _extras(self, rec: JobRecord, now: float) -> None:
        """Its running Workers above the count admitted, and those on lent nodes: the time
        since the last change is counted at the old figures."""
        if rec.extras_since < now and rec.extras != (0, 0):
            span = (now - rec.extras_since) * rec.per_pod_gpus
            self.stats["elastic_grown_gpu_s"] += rec.extras[0] * span
            self.stats["elastic_lent_extra_gpu_s"] += rec.extras[1] * span
            self.stats["lent_gpu_s"] += rec.extras[1] * span
        extra = lent = 0
        if rec.state == RUNNING:
            for _alive, node, running, index, _gated, _selected in rec.pods.values():
                if running and index >= rec.admitted:
                    extra += 1
                    lent += node in self.lent_nodes
        rec.extras, rec.extras_since = (extra, lent), now

    # -- resizes --------------------------------------------------------------------------------

    def _grow(self, resizes, now: float) -> None:
        """The plan's resizes: each job scaled up, its new slots added to its placement."""
        for job_id, resize in resizes.items():
            rec = self.records.get(job_id)
            workers = resize.counts.get(ROLE, 0)
            if rec is None or rec.state != RUNNING or workers <= rec.gang:
                continue
            self.stats["elastic_grows"] += 1
            self.grown_jobs.add(job_id)
            self.stats["elastic_grown_jobs"] = len(self.grown_jobs)
            rec.placement = tuple(rec.placement) + tuple(resize.placement or ())
            self._scale(rec, workers, now)

    def _scale(self, rec: JobRecord, workers: int, now: float) -> None:
        """Scale a running elastic job to ``workers`` through its operator, keeping its work
        accounting (the module's docstring says how)."""
        self._integrate(now)
        old = rec.gang
        self.busy += (workers - old) * rec.per_pod_gpus
        rec.gang, rec.gpus = workers, workers * rec.per_pod_gpus
        if workers < old:
            self.stats["elastic_shrinks"] += 1
            rec.placement = tuple(slot for slot in rec.placement if slot[1] < workers)
        running = self.running.get(rec.job.id)
        if running is not None:
            placements = tuple(slot for slot in running.placements if slot[1] < workers)
            self.running[rec.job.id] = dataclasses.replace(running, counts={ROLE: workers}, placements=placements)
        if rec.segments is None:  # not running in kubesim: its next run is timed at the new size
            self._annotate(rec, workers)
            self._scale_object(rec, workers)
            self.cluster.settle()
        elif workers < old:  # the gang stays whole: the run goes on, slower
            self._scale_object(rec, workers)
            self.cluster.settle()
            left = rec.work_left - work_done(rec.segments, now)
            rec.segments.append((now, workers))
            self._retime(rec, now + max(0.0, left) / workers)
        else:  # a Worker joins: the gang breaks until it runs, from the last checkpoint
            self._scale_object(rec, workers)
            self.cluster.settle()
            self._fold(rec, now)
            self._annotate(rec, workers)
        self._extras(rec, now)
        self._changed(now)

    def _annotate(self, rec: JobRecord, workers: int) -> None:
        duration = rec.kept_s + rec.work_left / workers
        body = {"metadata": {"annotations": {DURATION_ANNOTATION: repr(duration)}}}
        self.cluster.api.patch(rec.kind, rec.job.vc, job_name(rec.job.id), MERGE, body)

    # -- shrinking instead of preempting ----------------------------------------------------------

    def _extras_on(self, rec: JobRecord, nodes) -> int | None:
        """What an elastic job keeps if it gives back its Workers on ``nodes``: its count
        without them, when they are its highest-numbered Workers and it stays at its minimum
        or above; else None (dispatch/phases/reclaim.py ``extras_on``)."""
        if not rec.elastic:
            return None
        there = {index for _, node, _, index, _, selected in rec.pods.values() if (node or selected) in nodes}
        there |= {index for _, index, node in rec.placement if node in nodes and index < rec.gang}
        if not there:
            return None
        keep = rec.gang - len(there)
        if there != set(range(keep, rec.gang)) or keep < elastic_minimum(rec.job.gpus):
            return None
        return keep

    def _shrink_at_reclaim(self, rec: JobRecord, keep: int, now: float) -> None:
        """Its Workers on the pool go back; it runs on with ``keep``, not killed."""
        self.stats["reclaim_shrinks"] += 1
        self.reclaim_shrunk.add(rec.job.id)
        self.stats["reclaim_shrunk_jobs"] = len(self.reclaim_shrunk)
        if rec.lent_gpus and rec.run_started_at is not None:  # (its run's Workers there, since it started)
            self.stats["lent_gpu_s"] += rec.lent_gpus * (now - rec.run_started_at)
            rec.lent_gpus = 0
        self._scale(rec, keep, now)
