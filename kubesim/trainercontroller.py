"""The simulated Kubeflow Trainer v2 TrainJob controller (``TrainJobReconciler.Reconcile``, v2.1).

Per TrainJob: the JobSet built from its runtime (``trainer.build_jobset``), created once
(round-robin with other TrainJobs' JobSets) and afterwards only kept in step with the
TrainJob's ``suspend``; if the runtime is gone the reconcile fails with a
TrainJobResourcesCreationFailed event and is retried with backoff (no JobSet); an
unsupported runtime kind sets Failed (TrainingRuntimeNotSupported). Conditions: Suspended
(True while suspended, False "Resumed" after), Complete and Failed copied from the
JobSet's Completed and Failed; ``jobsStatus`` from its ``replicatedJobsStatus``.
``spec.podTemplateOverrides`` (v2.1) are applied to the JobSet's pod templates, also while
suspended (the JobSet is built again as long as the TrainJob or the JobSet is suspended).
Not modelled: initializers' datasets/models, ML policies beyond numNodes (torch/mpi
environment, launcher-as-node), PodGroups.
"""

from __future__ import annotations

from . import jobset as js_
from . import trainer
from .api import Api
from .errors import ApiError, not_found
from .jobsetcontroller import JobSetController
from .jsoncodec import clone
from .ownership import Owners, controller_ref
from .reconciler import Creation, Key, Reconciler
from .resources import CLUSTERTRAININGRUNTIMES, JOBSETS, TRAININGRUNTIMES, TRAINJOBS, ResourceType


class TrainJobController(Reconciler):
    name = "trainer-controller-manager"
    failed_create_reason = "TrainJobResourcesCreationFailed"

    def __init__(
        self,
        api: Api,
        owners: Owners,
        jobsets: JobSetController,
        backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 30.0,
    ):
        super().__init__(api, owners, (TRAINJOBS,), (JOBSETS,), backoff_seconds, max_backoff_seconds)
        self.jobsets = jobsets
        self._refused: dict[str, int | None] = {}  # TrainJob uid -> the generation whose JobSet update was refused

    def failed_create_message(self, exc: ApiError, child_rt: ResourceType) -> str:
        return f"TrainJob resources reconciliation failed: {exc.message[:950]}"

    def _runtime(self, trainjob: dict) -> dict | None:
        _, kind, name = trainer.runtime_ref(trainjob)
        if kind == "TrainingRuntime":
            return self.store.find(TRAININGRUNTIMES, trainjob["metadata"]["namespace"], name)
        return self.store.find(CLUSTERTRAININGRUNTIMES, "", name)

    def _jobset(self, trainjob: dict) -> dict | None:
        found = self.store.find(JOBSETS, trainjob["metadata"]["namespace"], trainjob["metadata"]["name"])
        if found is None or (controller_ref(found) or {}).get("uid") != trainjob["metadata"]["uid"]:
            return None
        return found

    def _missing_runtime(self, key: Key, trainjob: dict, now: float) -> None:
        """NewObjects failed: the error is an event and the reconcile is retried with backoff."""
        _, kind, name = trainer.runtime_ref(trainjob)
        plural = "trainingruntimes" if kind == "TrainingRuntime" else "clustertrainingruntimes"
        error = not_found(trainer.GROUP, plural, name)
        error.message = f"{kind} specified in TrainJob is not found: {error.message}"
        self.failed_create(key, JOBSETS, {}, error, now)

    def sync(self, rt: ResourceType, trainjob: dict, now: float) -> list[Creation]:
        if trainer.managed_elsewhere(trainjob):
            return []
        ns, name = trainjob["metadata"]["namespace"], trainjob["metadata"]["name"]
        key = (rt.plural, ns, name)
        status = clone(trainjob.get("status") or {})
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "Failed"]
        group, kind, _ = trainer.runtime_ref(trainjob)
        missing: list[Creation] = []
        jobset = self._jobset(trainjob)
        if group != trainer.GROUP or kind not in trainer.RUNTIME_KINDS:
            runtime_key = f"{kind}.{group}"
            trainer.set_condition(
                status,
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "TrainingRuntimeNotSupported",
                    "message": f"unsupported runtime: {runtime_key}",
                },
                now,
            )
        else:
            runtime = self._runtime(trainjob)
            if runtime is None:
                self._missing_runtime(key, trainjob, now)
            elif jobset is None:
                missing = [(JOBSETS, trainer.build_jobset(trainjob, runtime))]
            elif trainer.is_suspended(trainjob) or js_.is_suspended(jobset):
                jobset = self._rebuild(key, trainjob, runtime, jobset, now)
        self._set_suspended(status, trainjob, now)
        if jobset is not None:
            self._mirror(status, jobset, now)
        if not status["conditions"]:
            del status["conditions"]
        self.write_status(rt, trainjob, status)
        return missing

    def _rebuild(self, key: Key, trainjob: dict, runtime: dict, jobset: dict, now: float) -> dict:
        """The JobSet plugin's Build: while the TrainJob or its JobSet is suspended the JobSet
        is applied again from the runtime and the TrainJob (podTemplateOverrides changed
        meanwhile reach its pod templates; a resume carries them with suspend false). A change
        the JobSet refuses (only its templates' labels, annotations, nodeSelector, tolerations
        and schedulingGates may change while suspended) is an event, once per TrainJob spec."""
        wanted = trainer.build_jobset(trainjob, runtime)
        js_.default(wanted)
        spec = {
            **jobset["spec"],
            "replicatedJobs": wanted["spec"].get("replicatedJobs"),
            "suspend": trainer.is_suspended(trainjob),
        }
        if spec == jobset["spec"]:
            return jobset
        generation = trainjob["metadata"].get("generation")
        if self._refused.get(trainjob["metadata"]["uid"]) == generation:
            return jobset
        try:
            updated, _ = self.api.replace(
                JOBSETS,
                jobset["metadata"]["namespace"],
                jobset["metadata"]["name"],
                {**jobset, "spec": spec},
                internal=True,
            )
            return updated
        except ApiError as exc:
            self._refused[trainjob["metadata"]["uid"]] = generation
            self.record_event(key, "Warning", self.failed_create_reason, self.failed_create_message(exc, JOBSETS), now)
            return jobset

    @staticmethod
    def _set_suspended(status: dict, trainjob: dict, now: float) -> None:
        """setSuspendedCondition."""
        if trainer.is_suspended(trainjob):
            condition = {
                "type": "Suspended",
                "status": "True",
                "reason": "Suspended",
                "message": "TrainJob is suspended",
            }
        elif any(c.get("type") == "Suspended" and c.get("status") == "True" for c in status["conditions"]):
            condition = {"type": "Suspended", "status": "False", "reason": "Resumed", "message": "TrainJob is resumed"}
        else:
            return
        trainer.set_condition(status, condition, now)

    @staticmethod
    def _mirror(status: dict, jobset: dict, now: float) -> None:
        """The JobSet plugin's Status: Completed -> Complete, Failed -> Failed, jobsStatus."""
        for condition in (jobset.get("status") or {}).get("conditions") or []:
            if condition.get("status") != "True" or condition.get("type") not in ("Completed", "Failed"):
                continue
            ctype = "Complete" if condition["type"] == "Completed" else "Failed"
            trainer.set_condition(status, {**condition, "type": ctype}, now)
        statuses = (jobset.get("status") or {}).get("replicatedJobsStatus") or []
        if statuses:
            status["jobsStatus"] = [
                {
                    k: s.get(k, 0) if k != "name" else s.get("name")
                    for k in ("name", "ready", "succeeded", "failed", "active", "suspended")
                }
                for s in statuses
            ]

    # --- the work clock's view ------------------------------------------------------------------

    def gang(self, rt: ResourceType, trainjob: dict) -> tuple[int, list[dict]]:
        finished = trainer.has_condition(trainjob, "Complete") or trainer.has_condition(trainjob, "Failed")
        jobset = self._jobset(trainjob)
        if finished or trainer.is_suspended(trainjob) or jobset is None:
            return 0, []
        return self.jobsets.gang(JOBSETS, jobset)

    def finish(self, rt: ResourceType, trainjob: dict, pods: list[dict], fail: bool) -> list[tuple[dict, int]]:
        return self.jobsets.finish(JOBSETS, trainjob, pods, fail)
