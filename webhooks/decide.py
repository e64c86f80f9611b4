"""The webhook's decision for one AdmissionRequest: pass, queue (deny), or queue (suspend).

- Only CREATE of kubeflow.org TFJobs is acted on; everything else passes untouched.
- Creations by jobdash's own identities (settings.JOBDASH_OWN_IDENTITIES) pass: they are
  jobdash's releases.
- Everyone else's TFJob is queued, idempotently by namespace and name
  (services.job_submit_or_find): Katib retries a refused create until it succeeds, and
  every retry must land on the job the first attempt made.
  - deny: the object is stored as a Queued job (metadata kept: ownerReferences to the
    Katib Trial, labels, annotations) and the create is refused with a message naming the
    job and its position. On release jobdash creates the TFJob from the stored object.
  - suspend (training-operator >= 1.7): the create is allowed with a JSONPatch setting
    spec.runPolicy.suspend and the jobdash.io/queued label; the job is bound to the
    object by namespace and name, and release (mode unsuspend) resumes it.
- A TFJob its creator suspended stays under its creator's control (both modes).
- dryRun: the same verdict, nothing written, and nothing told about a job already stored
  under the name. A namespace jobdash does not manage passes.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from jobdash.cluster.gateway import QUEUED_LABEL, STALE_TERM_REASON, TERM_ANNOTATION
from jobdash.jobs import services
from jobdash.jobs.exceptions import InvalidInput
from jobdash.jobs.models import Fence, Job, Source, State

from .review import AdmissionRequest

log = logging.getLogger(__name__)

MODES = ("deny", "suspend")
# Set by the API server; a create that carries them is refused, so jobdash's own create
# of the stored object must not.
SERVER_SET_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)

try:  # libyaml's emitter is several times faster; the pure-Python one is the fallback
    _BaseDumper = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    # types-PyYAML aliases CSafeDumper to CDumper; really both are SafeRepresenter dumpers.
    _BaseDumper = yaml.SafeDumper  # type: ignore[assignment, misc]


class _Dumper(_BaseDumper):
    def ignore_aliases(self, data) -> bool:
        return True  # never anchors: jobdash's manifest parser refuses aliases


@dataclass(frozen=True)
class Decision:
    allowed: bool
    message: str = ""
    code: int | None = None
    reason: str = ""
    patch: list[dict] | None = None
    warnings: list[str] | None = None
    job_id: int | None = None  # for the log, not the response

    def response_fields(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "message": self.message,
            "code": self.code,
            "reason": self.reason,
            "patch": self.patch,
            "warnings": self.warnings,
        }


ALLOW = Decision(allowed=True)


def stored_object(request: AdmissionRequest) -> dict[str, Any]:
    """The object as jobdash keeps it: as the creator sent it, minus status and the fields
    the API server sets, in the request's namespace."""
    obj = copy.deepcopy(request.object or {})
    obj.pop("status", None)
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = obj["metadata"] = {}
    for key in SERVER_SET_METADATA:
        metadata.pop(key, None)
    if request.namespace:
        metadata["namespace"] = request.namespace
    if request.name and not metadata.get("name"):
        metadata["name"] = request.name  # a name the API server generated
    return obj


def manifest_text(obj: dict[str, Any]) -> str:
    """YAML for the job page (JSON is YAML too, but people read this)."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def suspend_patch(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """JSONPatch: spec.runPolicy.suspend = true and the jobdash.io/queued label, creating
    the parents that are missing (an `add` into a missing object fails)."""
    patch: list[dict[str, Any]] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        patch.append({"op": "add", "path": "/spec", "value": {"runPolicy": {"suspend": True}}})
    elif not isinstance(spec.get("runPolicy"), dict):
        patch.append({"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}})
    else:
        patch.append({"op": "add", "path": "/spec/runPolicy/suspend", "value": True})
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        patch.append({"op": "add", "path": "/metadata", "value": {"labels": {QUEUED_LABEL: "true"}}})
    elif not isinstance(metadata.get("labels"), dict):
        patch.append({"op": "add", "path": "/metadata/labels", "value": {QUEUED_LABEL: "true"}})
    else:
        patch.append({"op": "add", "path": f"/metadata/labels/{_escape(QUEUED_LABEL)}", "value": "true"})
    return patch


def _suspended_by_creator(obj: dict[str, Any]) -> bool:
    run_policy = (obj.get("spec") or {}).get("runPolicy") if isinstance(obj.get("spec"), dict) else None
    return isinstance(run_policy, dict) and run_policy.get("suspend") is True


def _position(job: Job, created: bool) -> str:
    namespace = job.namespace.name
    if job.position:
        return f"position {job.position} in {namespace}'s queue"
    if created:
        # Provisional: last in its namespace until the next admission cycle ranks it.
        ahead = Job.objects.filter(namespace_id=job.namespace_id, state=State.QUEUED).exclude(pk=job.pk).count()
        return f"position {ahead + 1} in {namespace}'s queue until the next admission cycle ranks it"
    return f"waiting in {namespace}'s queue for its first admission cycle"


_SUBMITTED_THROUGH: dict[str, str] = {Source.WEB: "web form", Source.API: "REST API", Source.ADMIN: "admin console"}


def _describe(job: Job, created: bool) -> str:
    """`jobdash job #12 (Queued, position 2 in team-a's queue: <why it waits>)`."""
    label = f"jobdash job #{job.pk}"
    if job.source != Source.WEBHOOK:
        through = _SUBMITTED_THROUGH.get(job.source, job.source)
        label += f" (submitted through the {through} by {job.submitted_by_name or 'jobdash'})"
    if job.state == State.QUEUED:
        why = f": {job.message}" if job.message else ""
        return f"{label}, Queued, {_position(job, created)}{why}"
    if job.state == State.RELEASED:
        return f"{label}, Released: jobdash is creating this TFJob in the cluster now"
    return f"{label}, {job.state}: its TFJob is in the cluster"


def _same_spec(job: Job, obj: dict[str, Any]) -> bool:
    return (job.parsed or {}).get("spec") == obj.get("spec")


def fence(request: AdmissionRequest) -> Decision:
    """A write of jobdash's own (create, unsuspend, take-back, the stamp before a delete)
    passes only under the leader term that leads now: the object carries the term it was
    written under (TERM_ANNOTATION), and one older than the Fence row's is refused before
    the API server stores anything. A deposed leader that wakes from a pause writes nothing.
    An object without the annotation is a write from outside the dispatcher (an operator's
    tool running as jobdash): it passes, as before the fence existed."""
    obj = request.object or {}
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    written = annotations.get(TERM_ANNOTATION) if isinstance(annotations, dict) else None
    if written is None:
        return ALLOW
    leading = Fence.objects.filter(id=1).values_list("term", flat=True).first() or 0
    try:
        term = int(written)
    except (TypeError, ValueError):
        term = -1
    if term >= leading:
        return ALLOW
    return Decision(
        allowed=False,
        code=403,
        reason=STALE_TERM_REASON,
        message=f"written under leader term {written}, but term {leading} leads now: a deposed leader writes nothing",
    )


def decide(request: AdmissionRequest, *, mode: str, own_identities: Iterable[str]) -> Decision:
    if mode not in MODES:
        raise ValueError(f"JOBDASH_WEBHOOK_MODE is {mode!r}; expected one of {', '.join(MODES)}")
    if request.username in own_identities and request.is_tfjob_write:
        return fence(request)  # jobdash's own write: only under the current term
    if not request.is_tfjob_create:
        return ALLOW
    obj = request.object or {}
    if _suspended_by_creator(obj):
        # Suspended by its creator: the creator decides when it runs. (Queued in deny mode,
        # it would be released suspended and never start.)
        return ALLOW
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    name = metadata.get("name") or request.name
    namespace = request.namespace or metadata.get("namespace") or ""
    if not isinstance(name, str) or not name or not namespace:
        return Decision(
            allowed=False,
            code=422,
            reason="Invalid",
            message="jobdash queues TFJobs by namespace and name: set metadata.name "
            "(generateName is not supported, as retries could not find their job)",
        )
    try:
        job, created = services.job_submit_or_find(
            namespace=namespace,
            name=name,
            # built only for a new job: a retry that finds its job costs one query
            manifest=lambda: manifest_text(stored_object(request)),
            source=Source.WEBHOOK,
            submitted_by_name=request.username or "system:anonymous",
            dry_run=request.dry_run,
        )
    except services.NamespaceNotManaged:
        return ALLOW
    except InvalidInput as error:
        return Decision(
            allowed=False,
            code=413 if error.status == 413 else 422,
            reason="Invalid",
            message=f"jobdash cannot queue TFJob {namespace}/{name}: {error.message}",
        )
    if created:
        log.info(
            "webhook: %s/%s from %s queued as job %s (%s mode%s)",
            namespace,
            name,
            request.username,
            job.pk if job else "-",
            mode,
            ", dry run" if request.dry_run else "",
        )
    if mode == "deny":
        decision = _deny_mode(job, created, namespace, name, obj)
    else:
        decision = _suspend_mode(job, created, namespace, name, obj)
    if request.dry_run and job is not None:
        return _undisclosed(decision, namespace, name)
    return decision


def _undisclosed(decision: Decision, namespace: str, name: str) -> Decision:
    """A dry run costs nothing and its answer is read by whoever asks: it says whether the
    create would pass, never which job holds the name, whose it is or where it waits."""
    said = f"TFJob {namespace}/{name}: jobdash already holds a job of this name (dry run: nothing stored)"
    if decision.allowed:
        return Decision(allowed=True, patch=decision.patch, warnings=[said])
    return Decision(allowed=False, code=decision.code, reason=decision.reason, message=said)


def _deny_mode(job: Job | None, created: bool, namespace: str, name: str, obj: dict[str, Any]) -> Decision:
    if job is None:  # dry run of a new job
        return Decision(
            allowed=False,
            code=403,
            reason="Forbidden",
            message=f"TFJob {namespace}/{name} would be queued by jobdash (dry run: nothing stored)",
        )
    verb = "is queued by jobdash as" if created else "is held by"
    message = f"TFJob {namespace}/{name} {verb} {_describe(job, created)}. "
    if job.state == State.QUEUED:
        message += "jobdash creates it, with its metadata, when the namespace's quota allows. "
    if not created and not _same_spec(job, obj):
        message += (
            f"This request's spec differs from the stored one: cancel jobdash job #{job.pk} to queue it instead. "
        )
    message += "Retries of this create land on the same job."
    return Decision(allowed=False, code=403, reason="Forbidden", message=message, job_id=job.pk)


def _suspend_mode(job: Job | None, created: bool, namespace: str, name: str, obj: dict[str, Any]) -> Decision:
    if job is None:  # dry run of a new job
        return Decision(
            allowed=True,
            patch=suspend_patch(obj),
            warnings=[
                f"jobdash would queue TFJob {namespace}/{name} and keep it suspended until it is released (dry run)"
            ],
        )
    if job.state != State.QUEUED:
        return Decision(
            allowed=False,
            code=409,
            reason="AlreadyExists",
            message=f"TFJob {namespace}/{name} belongs to {_describe(job, created)}",
            job_id=job.pk,
        )
    if job.source != Source.WEBHOOK:
        return Decision(
            allowed=False,
            code=409,
            reason="AlreadyExists",
            message=f"the name {namespace}/{name} is taken by {_describe(job, created)}; "
            "choose another name or cancel that job",
            job_id=job.pk,
        )
    if not created and not _same_spec(job, obj):
        return Decision(
            allowed=False,
            code=409,
            reason="AlreadyExists",
            message=f"TFJob {namespace}/{name} is queued as {_describe(job, created)} with a different spec; "
            f"cancel jobdash job #{job.pk} to queue this one",
            job_id=job.pk,
        )
    return Decision(
        allowed=True,
        patch=suspend_patch(obj),
        job_id=job.pk,
        warnings=[
            f"queued by jobdash as {_describe(job, created)}; the TFJob stays suspended until jobdash releases it"
        ],
    )
