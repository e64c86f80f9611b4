"""Pods no controller owns, as the work clock sees them: a plain Pod annotated
``kubesim.io/duration-seconds`` is its own workload, its container exiting after that much
running (or failing as ``kubesim.io/oom``, ``kubesim.io/exit-code`` or ``kubesim.io/fail``
say, see ``WorkClock``), as a real pod's process ends on its own. A plain Pod without the annotation runs until it is deleted, as before; a controller's
pods belong to their controller's workload."""

from __future__ import annotations

from .kubeflow import DURATION_ANNOTATION
from .resources import ResourceType


class BarePods:
    def gang(self, rt: ResourceType, obj: dict) -> tuple[int, list[dict]]:
        meta = obj["metadata"]
        owned = any(ref.get("controller") for ref in meta.get("ownerReferences") or ())
        timed = DURATION_ANNOTATION in (meta.get("annotations") or {})
        ended = obj.get("status", {}).get("phase") in ("Succeeded", "Failed") or meta.get("deletionTimestamp")
        if owned or not timed or ended:
            return 0, []
        return 1, [obj]

    def finish(self, rt: ResourceType, obj: dict, pods: list[dict], fail: bool) -> list[tuple[dict, int]]:
        return [(pod, 1 if fail else 0) for pod in pods]
