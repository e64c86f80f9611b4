"""Pinned placement in the replay (issue #31), as the dispatcher does it (jobdash/dispatch/
holding.py, pinning.py, lost.py), over the replay's watch cache.

Not yet as the dispatcher does it since issue 47: there a role whose pods the plan puts on
one node has its template name the node, with no gate and no patch; here every pod is gated
and patched. The replay's published figures were made this way, and with one-node templates
(pods then start within the cycle that releases them) the calibrator replayed alone over the
replay's forecast log no longer gave the replay's own figures to the sample
(tests/bench/test_bench_calibration_report.py), for a reason not yet found.

- Release: the TFJob is created with its pod templates held (``queueing.placement.hold``:
  the scheduling gate ``jobdash.io/placement`` in every template), so kubesim's
  training-operator creates every pod gated and its scheduler leaves them alone; a
  suspended TFJob is held first and then unsuspended (two writes, as holding.unsuspended).
- Suspend (a preemption, a take-back of a resumed job): suspended, then its templates
  restored (``placement.restore``, holding.suspended).
- Pin, each cycle after the releases: every gated pod of a released job is matched to a
  slot of its placement (``placement.assign``) and sent there by one merge patch on the
  pod (nodeSelector ``kubernetes.io/hostname=<node>``, the gate removed), as the gateway's
  ``ungate_pod``; kubesim's scheduler then binds it there (or nowhere).
- Lost slots (lost.py): a planned pod of a job still starting (Released) that is not bound
  to its node yet is lost when the node has no room for it any more, jobs released
  earlier keeping their room first; the replay's nodes never fail. The lost slots go to
  ``Snapshot.replacements``; the plan's ``replacements`` become the jobs' placements (the
  pods held by lost slots deleted: their operator makes them again, gated) and its
  ``evictions`` are taken back and queued again at once, without counting an attempt
  (transitions.node_failed).
"""

from __future__ import annotations

import time
from typing import Any

from kubesim.api import SYSTEM
from kubesim.resources import PODS
from queueing import placement as placing
from queueing.replacement import Replacement
from queueing.workload import adapter_for

from .mapping import HOSTNAME, job_name
from .records import RELEASED, RUNNING, JobRecord

TFJOB_ADAPTER = adapter_for("kubeflow.org/v1", "TFJob")
PYTORCH_ADAPTER = adapter_for("kubeflow.org/v1", "PyTorchJob")
MERGE = "application/merge-patch+json"
ROLE = "Worker"  # the jobs' only pod set here (TFJob's, elastic PyTorchJob's): every pod's role


def _adapter(rec: JobRecord):
    adapter = PYTORCH_ADAPTER if rec.elastic else TFJOB_ADAPTER
    assert adapter is not None
    return adapter


class Pinning:
    """Mixed into ``engine.Replay``, whose ``__init__`` sets the state these methods keep."""

    def _held(self, manifest: dict[str, Any], rec: JobRecord) -> dict[str, Any]:
        """A job's manifest with its templates gated (holding.created)."""
        return placing.hold(_adapter(rec), manifest, rec.workload)

    def _hold_object(self, rec: JobRecord) -> None:
        """A suspended job's templates gated before it is unsuspended (holding.unsuspended)."""
        adapter, workload = _adapter(rec), rec.workload
        self.cluster.api.update_with(
            rec.kind,
            rec.job.vc,
            job_name(rec.job.id),
            lambda obj: placing.hold(adapter, obj, workload),
            SYSTEM,
            False,
            "",
        )

    def _restore_object(self, rec: JobRecord) -> None:
        """A suspended job's templates as the user wrote them (holding.suspended)."""
        adapter = _adapter(rec)
        self.cluster.api.update_with(
            rec.kind,
            rec.job.vc,
            job_name(rec.job.id),
            lambda obj: placing.restore(adapter, obj),
            SYSTEM,
            False,
            "",
        )

    # -- lost slots (lost.py), for the snapshot -------------------------------------------------

    def _lost(self) -> tuple[Replacement, ...]:
        """The planned pods of the jobs still starting that their nodes have no room for any
        more (lost.lost over the replay's watch cache: no node fails here, so only room
        taken counts). Jobs released earlier keep their room first."""
        if not self.config.pin or not self.inflight:
            return ()
        room: dict[str, dict[str, int]] = {}
        allocatable, node_alloc = self.allocatable, self.node_alloc
        replacements = []
        for rec in sorted(self.inflight.values(), key=lambda r: (r.released_at or 0.0, r.job.id)):
            if not rec.placement:
                continue
            bound = dict(rec.bound_nodes)
            kept, gone = [], []
            for slot in rec.placement:
                node = slot[2]
                if bound.get(node, 0) > 0:  # it runs there (its room counted with the bound pods)
                    bound[node] -= 1
                    kept.append(slot)
                    continue
                left = room.get(node)
                if left is None:
                    alloc = node_alloc[node]
                    left = room[node] = {key: amount - alloc.get(key, 0) for key, amount in allocatable.items()}
                if all(left.get(key, 0) >= amount for key, amount in rec.requests.items()):
                    for key, amount in rec.requests.items():
                        left[key] = left.get(key, 0) - amount
                    kept.append(slot)
                else:
                    gone.append(slot)
            if gone:
                replacements.append(
                    Replacement(rec.job.id, rec.job.vc, rec.in_flight_workload, tuple(kept), tuple(gone))
                )
        return tuple(replacements)

    # -- replace (pinning.replace) ---------------------------------------------------------------

    def _replace(self, result, lost: tuple[Replacement, ...], now: float) -> None:
        """The plan's new placements of gangs that lost slots (their pods held by those slots
        deleted, to be made again gated), and its evictions taken back."""
        slots = {replacement.job_id: replacement.lost for replacement in lost}
        for job_id, new in result.replacements.items():
            rec = self.inflight.get(job_id)
            if rec is None:
                continue
            self.stats["replaced"] += 1
            rec.placement = tuple(new)
            rec.inflight = None
            for name in self._stranded(rec, slots.get(job_id, ())):
                self.cluster.api.delete(PODS, rec.job.vc, name)
                self.stats["stranded_pods_deleted"] += 1
        for job_id in result.evictions:
            rec = self.inflight.get(job_id)
            if rec is not None and rec.state == RELEASED:
                self.stats["evicted"] += 1
                self._take_back(rec, now, count_attempt=False)

    def _stranded(self, rec: JobRecord, lost) -> list[str]:
        """pinning._stranded: the job's pods held by the slots it lost (sent to a node that
        has no room for them any more; the replay's nodes never fail)."""
        left: dict[str, int] = {}
        for _, _, node in lost:
            left[node] = left.get(node, 0) + 1
        stranded = []
        for name, (alive, bound, _running, _index, _gated, selected) in rec.pods.items():
            if not alive or bound is not None or not selected:
                continue
            if left.get(selected, 0) > 0:
                left[selected] -= 1
                stranded.append(name)
        return stranded

    # -- pin (pinning.pin) --------------------------------------------------------------------

    def _pin(self) -> None:
        """Every gated pod of the released jobs to its planned node: one merge patch each
        (nodeSelector on the node's hostname, the gate removed); then kubesim binds them."""
        if not self.gated_jobs:
            return
        began = time.perf_counter()
        assign, JobPod = placing.assign, placing.JobPod
        patch = self.cluster.api.patch
        sent = 0
        for job_id in sorted(self.gated_jobs):
            rec = self.records.get(job_id)
            # (a running elastic job's new Workers too: phase 12 sends them as a release's)
            if rec is None or not rec.placement or not (rec.state == RELEASED or rec.state == RUNNING and rec.elastic):
                continue
            pods = [
                # (the dispatcher's JobPod has no index: kinds.pod_role and the pod's node only)
                JobPod(name, ROLE, gated=gated, node=bound or selected)
                for name, (alive, bound, _running, _index, gated, selected) in rec.pods.items()
                if alive
            ]
            assignment = assign(rec.placement, pods)
            for name, node in assignment.nodes.items():
                body = {"spec": {"nodeSelector": {HOSTNAME: node}, "schedulingGates": None}}
                patch(PODS, rec.job.vc, name, MERGE, body)
                sent += 1
            self.stats["beyond_plan"] += len(assignment.unassigned)
        self.stats["ungated"] += sent
        if sent:
            self.cluster.settle()  # kubesim's scheduler binds them
        self.stats["pin_s"] += time.perf_counter() - began
