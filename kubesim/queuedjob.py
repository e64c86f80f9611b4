"""jobdash's QueuedJob (``jobdash.io/v1alpha1``, shortName ``qj``, category ``jobdash``):
a waiting job's place in jobdash's queue, written by jobdash alone (as a Kueue Workload is
by Kueue), so that ``kubectl get queuedjobs`` shows the queue and ``kubectl delete`` leaves it.

Served as the CRD in ``deploy/base/queuedjobs.yaml`` declares it: no status subresource
(only jobdash writes these, spec and status together), its schema's required fields and
types checked, and its ``additionalPrinterColumns`` (``PRINTER_COLUMNS``, which a test
compares with the shipped manifest) printed by ``kubectl get``.
"""

from __future__ import annotations

from collections.abc import Callable

from .validation import cause, required

GROUP, VERSION = "jobdash.io", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND, PLURAL = "QueuedJob", "queuedjobs"
SHORT_NAMES = ["qj"]
CATEGORIES = ["jobdash"]

# (name, type, jsonPath, description, priority): the CRD's additionalPrinterColumns. The start
# range is a pair of instants, printed as written: a "date" column would print a future
# time as "<invalid>" (the API server's HumanDuration of a negative age).
PRINTER_COLUMNS: list[tuple[str, str, str, str, int]] = [
    ("Kind", "string", ".spec.kind", "The kind of the job's object", 0),
    ("Position", "integer", ".status.position", "Its place in the queue (1 goes first)", 0),
    ("Reason", "string", ".status.reason", "What it waits for", 0),
    ("Likely start", "string", ".status.likelyStart", "The likely start (calibrated forecast)", 0),
    ("Late bound", "string", ".status.lateBound", "90 % of jobs start by then", 0),
    ("Message", "string", ".status.message", "Why it waits, in words", 1),
    ("Age", "date", ".metadata.creationTimestamp", "", 0),
]

SPEC_FIELDS = {"jobId": int, "kind": str, "apiVersion": str, "name": str}
STATUS_FIELDS = {
    "state": str,
    "position": int,
    "reason": str,
    "message": str,
    "likelyStart": str,
    "lateBound": str,
}


def validate(obj: dict) -> list[dict]:
    """The CRD's structural schema: spec.jobId, spec.kind and spec.name required; every known
    field of its type (unknown ones are pruned by a structural schema, here kept)."""
    causes: list[dict] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    for name in ("jobId", "kind", "name"):
        if spec.get(name) in (None, ""):
            causes.append(required(f"spec.{name}"))
    status = obj.get("status")
    if status is not None and not isinstance(status, dict):
        causes.append(cause("status", f"Invalid value: {type(status).__name__}: status in body must be of type object"))
        status = None
    for where, fields, values in (("spec", SPEC_FIELDS, spec), ("status", STATUS_FIELDS, status or {})):
        for name, wanted in fields.items():
            value = values.get(name)
            if value is None:
                continue
            if not isinstance(value, wanted) or isinstance(value, bool):
                typename = "integer" if wanted is int else "string"
                causes.append(
                    cause(
                        f"{where}.{name}",
                        f'Invalid value: "{type(value).__name__}": {where}.{name} in body must be of type {typename}',
                    )
                )
    return causes


def json_path(obj: dict, path: str) -> object:
    """A printer column's simple jsonPath (``.a.b``) read from the object."""
    value: object = obj
    for part in path.strip(".").split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def reader(path: str) -> Callable[[dict], object]:
    return lambda obj: json_path(obj, path)
