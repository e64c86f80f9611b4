"""The simulated JobSet controller (jobset v0.8-v0.10 ``JobSetReconciler.reconcile``).

Per JobSet: one batch Job per replicatedJob replica (``<jobset>-<replicatedJob>-<i>``,
created round-robin with other JobSets' Jobs; the Job controller then runs their pods),
``spec.suspend`` propagated to the Jobs (resuming clears their startTime first and
carries the pod templates' labels, annotations and scheduling fields over), the status
``replicatedJobsStatus`` (ready/succeeded/failed/active/suspended Jobs per replicatedJob)
and conditions: Completed when the success policy's Jobs completed (default: all),
Failed when a Job failed (or, with a failurePolicy, once maxRestarts recreations of all
Jobs are used up), Suspended. A finished JobSet's active Jobs are deleted.
Not modelled: failurePolicy rules, startupPolicy InOrder, dependsOn, coordinator,
exclusive placement, headless Services, TTL.
"""

from __future__ import annotations

from . import batchjob as bj
from . import jobset as js_
from .api import Api
from .errors import ApiError
from .jobcontroller import JobController, finish_pods
from .jsoncodec import clone
from .ownership import Owners
from .reconciler import Creation, Reconciler
from .resources import JOBS, JOBSETS, ResourceType


class JobSetController(Reconciler):
    name = "jobset"
    failed_create_reason = "JobCreationFailed"

    def __init__(
        self,
        api: Api,
        owners: Owners,
        jobs: JobController,
        backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 30.0,
    ):
        super().__init__(api, owners, (JOBSETS,), (JOBS,), backoff_seconds, max_backoff_seconds)
        self.jobs = jobs

    def failed_create_message(self, exc: ApiError, child_rt: ResourceType) -> str:
        return exc.message

    def _current_jobs(self, js: dict, restarts: int) -> tuple[list[dict], list[dict]]:
        """(Jobs of the current restart attempt, Jobs of earlier ones)."""
        current: list[dict] = []
        previous: list[dict] = []
        for job in self.owners.children(js, JOBS):
            attempt = (job["metadata"].get("labels") or {}).get(js_.RESTARTS_KEY, "0")
            (previous if attempt.isdigit() and int(attempt) < restarts else current).append(job)
        return current, previous

    def sync(self, rt: ResourceType, js: dict, now: float) -> list[Creation]:
        if js_.managed_elsewhere(js):
            return []
        status = clone(js.get("status") or {})
        jobs, previous = self._current_jobs(js, status.get("restarts", 0))
        active = [j for j in jobs if not bj.is_finished(j)]
        failed = [j for j in jobs if bj.is_failed(j)]
        succeeded = [j for j in jobs if bj.is_complete(j)]
        status["replicatedJobsStatus"] = self._replicated_statuses(js, jobs)
        if js_.is_finished(js):
            self._delete_all(active)
            self.write_status(rt, js, status)
            return []
        self._delete_all(previous)
        if failed:
            self._fail_or_restart(js, status, failed, jobs, now)
            self.write_status(rt, js, status)
            return []
        if succeeded and sum(1 for j in succeeded if js_.counts_for_success(js, j)) >= js_.expected_jobs(js):
            js_.update_condition(status, "Completed", "True", "AllJobsCompleted", "jobset completed successfully", now)
            status["terminalState"] = "Completed"
            self._delete_all(active)
            self.write_status(rt, js, status)
            return []
        view = {**js, "status": status}  # restarts as of now: the new Jobs' restart-attempt label
        existing = {j["metadata"]["name"] for j in jobs + previous}
        missing: list[Creation] = []
        for rjob in js_.replicated_jobs(js):
            for index in range(js_.replicas(rjob)):
                if js_.job_name(js["metadata"]["name"], rjob["name"], index) not in existing:
                    missing.append((JOBS, js_.build_job(view, rjob, index)))
        if js_.is_suspended(js):
            for job in active:
                if not bj.is_suspended(job):
                    self.replace(JOBS, {**job, "spec": {**job["spec"], "suspend": True}})
            js_.update_condition(status, "Suspended", "True", "SuspendedJobs", "jobset is suspended", now)
        else:
            templates = {
                r["name"]: (r.get("template") or {}).get("spec", {}).get("template") or {}
                for r in js_.replicated_jobs(js)
            }
            for job in active:
                if bj.is_suspended(job):
                    self._resume(
                        job, templates.get((job["metadata"].get("labels") or {}).get(js_.REPLICATED_JOB_NAME_KEY), {})
                    )
            js_.update_condition(status, "Suspended", "False", "ResumeJobs", "jobset is resumed", now)
        self.write_status(rt, js, status)
        return missing

    def _resume(self, job: dict, template: dict) -> None:
        """resumeJob: clear startTime (a started Job's template is immutable), merge the
        template's labels, annotations, nodeSelector, tolerations and gates, unsuspend."""
        if (job.get("status") or {}).get("startTime"):
            status = {k: v for k, v in job["status"].items() if k != "startTime"}
            job = self.replace(JOBS, {**job, "status": status}, "status") or job
        pod_template = clone(job["spec"]["template"])
        meta, spec = pod_template.setdefault("metadata", {}), pod_template.setdefault("spec", {})
        for key in ("labels", "annotations"):
            merged = {**(meta.get(key) or {}), **((template.get("metadata") or {}).get(key) or {})}
            if merged:
                meta[key] = merged
        source = template.get("spec") or {}
        if source.get("nodeSelector"):
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **source["nodeSelector"]}
        for key in ("tolerations", "schedulingGates"):
            extra = [x for x in source.get(key) or [] if x not in (spec.get(key) or [])]
            if extra:
                spec[key] = (spec.get(key) or []) + extra
        self.replace(JOBS, {**job, "spec": {**job["spec"], "template": pod_template, "suspend": False}})

    def _fail_or_restart(self, js: dict, status: dict, failed: list[dict], jobs: list[dict], now: float) -> None:
        policy = (js.get("spec") or {}).get("failurePolicy")
        if policy is None:
            first = min(
                failed,
                key=lambda j: ((bj.condition(j, "Failed") or {}).get("lastTransitionTime", ""), j["metadata"]["name"]),
            )
            message = f"jobset failed due to one or more job failures (first failed job: {first['metadata']['name']})"
            js_.update_condition(status, "Failed", "True", "FailedJobs", message, now)
        elif status.get("restartsCountTowardsMax", 0) >= int(policy.get("maxRestarts") or 0):
            message = "jobset failed due to reaching max number of restarts"
            js_.update_condition(status, "Failed", "True", "ReachedMaxRestarts", message, now)
        else:  # RestartJobSet: every Job of this attempt is recreated
            status["restarts"] = status.get("restarts", 0) + 1
            status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + 1
            self._delete_all(jobs)
            self.mark_dirty((JOBSETS.plural, js["metadata"]["namespace"], js["metadata"]["name"]))
            return
        status["terminalState"] = "Failed"
        self._delete_all([j for j in jobs if not bj.is_finished(j)])

    def _delete_all(self, jobs: list[dict]) -> None:
        for job in jobs:
            self.delete(JOBS, job)

    @staticmethod
    def _replicated_statuses(js: dict, jobs: list[dict]) -> list[dict]:
        """calculateReplicatedJobStatuses: per replicatedJob, in spec order."""
        counts = {
            r["name"]: dict.fromkeys(("ready", "succeeded", "failed", "active", "suspended"), 0)
            for r in js_.replicated_jobs(js)
        }
        for job in jobs:
            entry = counts.get((job["metadata"].get("labels") or {}).get(js_.REPLICATED_JOB_NAME_KEY, ""))
            if entry is None:
                continue
            status, spec = job.get("status") or {}, job.get("spec") or {}
            if bj.is_complete(job):
                entry["succeeded"] += 1
            elif bj.is_failed(job):
                entry["failed"] += 1
            else:
                pods = int(spec.get("parallelism") or 0)
                if spec.get("completions") is not None:
                    pods = min(pods, int(spec["completions"]))
                if status.get("succeeded", 0) + status.get("ready", 0) >= pods:
                    entry["ready"] += 1
                if status.get("active", 0) > 0:
                    entry["active"] += 1
                if bj.is_suspended(job):
                    entry["suspended"] += 1
        return [{"name": name, **entry} for name, entry in counts.items()]

    # --- the work clock's view ------------------------------------------------------------------

    def gang(self, rt: ResourceType, js: dict) -> tuple[int, list[dict]]:
        """All the JobSet's Jobs must run together (a distributed job spans them)."""
        if js_.is_finished(js) or js_.is_suspended(js) or js_.managed_elsewhere(js):
            return 0, []
        jobs, _ = self._current_jobs(js, (js.get("status") or {}).get("restarts", 0))
        by_name = {j["metadata"]["name"]: j for j in jobs}
        expected, pods = 0, []
        for rjob in js_.replicated_jobs(js):
            for index in range(js_.replicas(rjob)):
                job = by_name.get(js_.job_name(js["metadata"]["name"], rjob["name"], index))
                if job is None:  # not created yet: what its template asks for
                    spec = (rjob.get("template") or {}).get("spec") or {}
                    expected += bj.wanted_active({"parallelism": 1, **spec}, 0)
                    continue
                wanted, job_pods = self.jobs.job_gang(job)
                expected += wanted
                pods += job_pods
        return expected, pods

    def finish(self, rt: ResourceType, js: dict, pods: list[dict], fail: bool) -> list[tuple[dict, int]]:
        return finish_pods(pods, fail)
