"""The cluster as the dispatcher's watch cache sees it, from kubesim's store events.

A hook on the store (an informer without lag) keeps, per job, its pods (alive, bound,
running), the nodes' allocated resources and the quotas' usage; it moves jobs to
running when their whole gang runs and to done when the TFJob succeeds, and it keeps
the time-integrated metrics (busy and held GPUs, GPU-seconds held by partial gangs).
"""

from __future__ import annotations

import heapq

from kubesim.quota import pod_requests
from kubesim.resources import NODES, PODS, PYTORCHJOBS, RESOURCEQUOTAS, TFJOBS
from kubesim.tfjob import JOB_NAME_LABEL, REPLICA_INDEX_LABEL
from queueing.placement import GATE
from queueing.quantity import canonical

from .mapping import GPU, HOSTNAME, QUOTA_KEY, job_id_of
from .records import DONE, RELEASED, RUNNING, JobRecord


class WatchCache:
    """Mixed into ``engine.Replay``, whose ``__init__`` sets the state these methods keep."""

    def _on_event(self, rt, event) -> None:
        if rt is PODS:
            self._pod_event(event)
        elif rt is TFJOBS or rt is PYTORCHJOBS:
            self._tfjob_event(event)
        elif rt is NODES:
            self._node_event(event)
        elif rt is RESOURCEQUOTAS:
            status = event.obj.get("status") or {}
            used = (status.get("used") or {}).get(QUOTA_KEY)
            if used is not None:
                ns = event.obj["metadata"]["namespace"]
                value = canonical(GPU, used)
                if self.quota_used.get(ns) != value:
                    self.quota_used[ns] = value
                    self.dirty_quotas.add(ns)

    def _changed(self, now: float) -> None:
        if self.changed_at is None:
            self.changed_at = now

    def _pod_event(self, event) -> None:
        obj = event.obj
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        job_id = job_id_of(labels.get(JOB_NAME_LABEL, ""))
        rec = self.records.get(job_id) if job_id is not None else None
        if rec is None:
            if job_id is None:  # not a job's: it takes room all the same
                self._foreign_pod(event)
            return
        name = meta["name"]
        old = rec.pods.get(name)
        if event.type == "DELETED":
            new = None
        else:
            phase = (obj.get("status") or {}).get("phase")
            alive = phase not in ("Succeeded", "Failed")
            spec = obj.get("spec") or {}
            node = spec.get("nodeName") if alive else None
            gates = spec.get("schedulingGates")
            gated = alive and bool(gates) and any(gate.get("name") == GATE for gate in gates)
            selected = (spec.get("nodeSelector") or {}).get(HOSTNAME, "")
            new = (alive, node, phase == "Running", int(labels.get(REPLICA_INDEX_LABEL, 0)), gated, selected)
        if old == new:
            return
        now = self.clock.now()
        self._changed(now)
        self._integrate(now)
        if old is not None:
            rec.n_pods -= 1
            rec.n_alive -= old[0]
            rec.n_running -= old[2]
            rec.n_gated -= old[4]
            if old[1] is not None:
                rec.n_bound -= 1
                left = rec.bound_nodes[old[1]] - 1
                if left:
                    rec.bound_nodes[old[1]] = left
                else:
                    del rec.bound_nodes[old[1]]
                self._charge(old[1], rec.requests, -1)
        if new is None:
            rec.pods.pop(name, None)
        else:
            rec.pods[name] = new
            rec.n_pods += 1
            rec.n_alive += new[0]
            rec.n_running += new[2]
            rec.n_gated += new[4]
            if new[1] is not None:
                rec.n_bound += 1
                rec.bound_nodes[new[1]] = rec.bound_nodes.get(new[1], 0) + 1
                self._charge(new[1], rec.requests, 1)
                if old is None or old[1] != new[1]:
                    self._bound(rec, new[1])
        if rec.n_gated:
            self.gated_jobs.add(rec.job.id)
        else:
            self.gated_jobs.discard(rec.job.id)
        self._partial(rec, now)
        if rec.state == RELEASED and rec.n_running >= rec.gang:
            self._started(rec, now)
        if rec.elastic:
            self._elastic_pods(rec, now)

    def _foreign_pod(self, event) -> None:
        """A pod that did not come through the replay (none does on the trace; a test makes
        one): its node's room is charged as the dispatcher's live pods charge it."""
        obj = event.obj
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        spec = obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        node = spec.get("nodeName") if event.type != "DELETED" and phase not in ("Succeeded", "Failed") else None
        old = self.foreign_pods.pop(key, None)
        if old is not None:
            self._charge(old[0], old[1], -1)
        if node in self.node_alloc:
            requests = {**pod_requests(spec, "requests"), "pods": 1}
            self.foreign_pods[key] = (node, requests)
            self._charge(node, requests, 1)
        if old is not None or node is not None:
            self._changed(self.clock.now())

    def _bound(self, rec: JobRecord, node: str) -> None:
        """A pod of the job was bound to ``node``: off the plan if the job now has more pods
        there than its placement plans there (pinning.off_plan, counted as it happens)."""
        if self.plan_clusters:  # (issue 49) in the job's cluster, or the replay raises
            self._bound_in_cluster(rec, node)
        if not self.config.pin or not rec.placement or self.policy is None:
            return
        planned = sum(1 for _, _, where in rec.placement if where == node)
        if rec.bound_nodes[node] > planned:
            self.stats["off_plan"] += 1

    def _charge(self, node: str, requests: dict[str, int], sign: int) -> None:
        alloc = self.node_alloc.get(node)
        if alloc is None:  # a reclaimed node, deleted before the pods it had
            self.held += sign * requests.get(GPU, 0)
            return
        for key, amount in requests.items():
            alloc[key] = alloc.get(key, 0) + sign * amount
        self.held += sign * requests.get(GPU, 0)
        self.dirty_nodes.add(node)

    def _partial(self, rec: JobRecord, now: float) -> None:
        """GPUs a job holds while its gang is incomplete: bound pods hold nodes, created pods
        hold quota, and the job cannot make progress until every pod is bound."""
        partial = rec.state in (RELEASED,) and 0 < rec.n_alive and rec.n_bound < rec.gang
        node = rec.n_bound * rec.per_pod_gpus if partial else 0
        quota = rec.n_alive * rec.per_pod_gpus if partial else 0
        self.partial_node += node - rec.partial_node
        self.partial_quota += quota - rec.partial_quota
        rec.partial_node, rec.partial_quota = node, quota
        if partial and rec.partial_since is None:
            rec.partial_since = now
        elif not partial and rec.partial_since is not None:
            if now > rec.partial_since:  # not just the instant between a pod's create and its binding
                rec.partial_s += now - rec.partial_since
                rec.ever_partial = True
            rec.partial_since = None

    def _started(self, rec: JobRecord, now: float) -> None:
        rec.state = RUNNING
        if rec.started_at is None:
            rec.started_at = now
        rec.run_started_at = now
        if rec.suspended_at is not None:  # resumed after a preemption
            rec.requeued_s += now - rec.suspended_at
            rec.suspended_at = None
        self.inflight.pop(rec.job.id, None)
        rec.inflight = None
        self.busy += rec.gpus
        self.last_progress = now
        self._partial(rec, now)
        self._started_lent(rec)
        if self.policy is not None:
            expected_end = None
            if self.backfill:
                # The estimate when it starts (the dispatcher would store it with the job);
                # the new estimator's is the prediction made at submission.
                estimate = rec.estimate if self.predictor is not None else self.estimate(rec.job.vc, rec.job.gpus)
                if estimate is not None:
                    expected_end = now + estimate
                    heapq.heappush(self.expected_ends.setdefault(rec.job.vc, []), (expected_end, rec.job.id))
            self.running[rec.job.id] = self._running_job(rec, expected_end)
            # Each forecast it was given, against its real wait, and the ranges it was shown resolved.
            self.stats["calibration_observed"] += self.calibrator.learn_start(self.forecasts, rec.job.id, now)

    def _tfjob_event(self, event) -> None:
        obj = event.obj
        job_id = job_id_of(obj["metadata"]["name"])
        rec = self.records.get(job_id) if job_id is not None else None
        if rec is None:
            return
        now = self.clock.now()
        if rec.checkpoint_s and event.type == "MODIFIED" and self._checkpoint_event(rec, obj, now):
            return  # (a checkpoint's report: checkpoints.py)
        self._changed(now)
        if event.type != "MODIFIED" or rec.state != RUNNING:
            return
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "Succeeded" and condition.get("status") == "True":
                self._finished(rec, now)
                return

    def _finished(self, rec: JobRecord, now: float) -> None:
        self._integrate(now)
        rec.state = DONE
        rec.finished_at = now
        self.busy -= rec.gpus
        self.last_progress = now
        self.running.pop(rec.job.id, None)
        del self.records[rec.job.id]
        self._ran(rec, now)
        if rec.elastic:
            self._extras(rec, now)
        rec.pods = {}
        rec.bound_nodes = {}
        self.gated_jobs.discard(rec.job.id)
        rec.run_s += now - rec.run_started_at
        self.durations.record(rec.job.vc, rec.job.gpus, rec.run_s)
        if self.predictor is not None:
            self.predictor.observe(self.features(rec.job.vc, rec.job.gpus), rec.run_s, rec.prediction)

    # -- metrics over time --------------------------------------------------------------------

    def _integrate(self, now: float) -> None:
        t = self.metric_t
        if now <= t:
            return
        self.partial_node_gpu_s += self.partial_node * (now - t)
        self.partial_quota_gpu_s += self.partial_quota * (now - t)
        size = self.config.util_bucket_s
        busy, held = self.busy, self.held
        buckets, held_buckets = self.util_buckets, self.held_buckets
        while t < now:
            index = int((t - self.start) // size)
            while len(buckets) <= index:
                buckets.append(0.0)
                held_buckets.append(0.0)
            upto = min(now, self.start + (index + 1) * size)
            buckets[index] += busy * (upto - t)
            held_buckets[index] += held * (upto - t)
            t = upto
        self.metric_t = now
