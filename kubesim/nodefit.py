"""kube-scheduler's node filters and NodeResourcesFit scoring, as pure functions (v1.30,
pkg/scheduler/framework/plugins: nodeunschedulable, tainttoleration, nodeaffinity,
noderesources).

Scoring strategies (NodeResourcesFitArgs.scoringStrategy): LeastAllocated (the default),
MostAllocated and RequestedToCapacityRatio, each over ``resources`` (name and weight;
default cpu and memory, weight 1) with kube-scheduler's integer arithmetic: a resource
scores 0..100, the node the weighted mean. For cpu and memory the pod's and the node's
requests are the non-zero ones (a container that requests no cpu counts 100m, no memory
200Mi); an extended resource (nvidia.com/gpu) counts only for pods that request it, and
only on nodes that have it allocatable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .quota import canonical

SCORING_STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
DEFAULT_RESOURCES: tuple[dict, ...] = ({"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1})
MAX_NODE_SCORE = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # a RequestedToCapacityRatio shape's scores are 0..10
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_NATIVE = ("cpu", "memory", "ephemeral-storage", "pods", "storage")


def validate_scoring(section: Mapping) -> tuple[str, list[dict], list[dict]]:
    """(strategy, resources, shape) from the config's ``scheduler`` section, or ValueError
    with ValidateNodeResourcesFitArgs' findings."""
    strategy = str(section.get("scoring", "LeastAllocated"))
    if strategy not in SCORING_STRATEGIES:
        raise ValueError(f"scheduler: scoring must be one of {list(SCORING_STRATEGIES)}, got {strategy!r}")
    resources = section.get("resources")
    if resources is None:
        resources = [dict(r) for r in DEFAULT_RESOURCES]
    if not isinstance(resources, list) or not resources:
        raise ValueError("scheduler: resources must be a non-empty list of {name, weight}")
    checked: list[dict] = []
    for i, resource in enumerate(resources):
        if not isinstance(resource, dict) or not isinstance(resource.get("name"), str) or not resource["name"]:
            raise ValueError(f"scheduler: resources[{i}]: needs a name")
        unknown = set(resource) - {"name", "weight"}
        if unknown:
            raise ValueError(f"scheduler: resources[{i}]: unknown keys {sorted(unknown)}")
        weight = resource.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int) or not 0 < weight <= 100:
            raise ValueError(
                f"scheduler: resources[{i}].weight: Invalid value: {weight!r}: resource weight of "
                f"{resource['name']} not in valid range (0, 100]"
            )
        checked.append({"name": resource["name"], "weight": weight})
    shape = section.get("shape")
    if strategy != "RequestedToCapacityRatio":
        if shape is not None:
            raise ValueError("scheduler: shape is only for scoring RequestedToCapacityRatio")
        return strategy, checked, []
    return strategy, checked, _validate_shape(shape)


def _validate_shape(shape: object) -> list[dict]:
    """validateFunctionShape: at least one point, utilization strictly increasing in 0..100, score 0..10."""
    if not isinstance(shape, list) or not shape:
        raise ValueError("scheduler: shape: Required value: at least one point must be specified")
    points: list[dict] = []
    for i, point in enumerate(shape):
        if not isinstance(point, dict) or set(point) != {"utilization", "score"}:
            raise ValueError(f"scheduler: shape[{i}]: needs exactly utilization and score")
        for key, top in (("utilization", 100), ("score", MAX_CUSTOM_PRIORITY_SCORE)):
            value = point[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
                raise ValueError(
                    f"scheduler: shape[{i}].{key}: Invalid value: {value!r}: not in valid range [0, {top}]"
                )
        if points and points[-1]["utilization"] >= point["utilization"]:
            raise ValueError(
                f"scheduler: shape[{i}].utilization: Invalid value: {point['utilization']}: "
                "utilization values must be sorted in increasing order"
            )
        points.append({"utilization": point["utilization"], "score": point["score"]})
    return points


def is_scalar(resource: str) -> bool:
    """IsScalarResourceName: extended (domain-prefixed), hugepages and attachable volumes."""
    if resource in _NATIVE:
        return False
    return (
        "/" in resource
        and not resource.startswith("kubernetes.io/")
        or resource.startswith(("hugepages-", "attachable-volumes-"))
    )


def nonzero_requests(spec: dict) -> dict[str, int]:
    """The pod's cpu and memory requests with kube-scheduler's defaults for containers that request none."""
    total = {"cpu": 0, "memory": 0}
    init = {"cpu": 0, "memory": 0}
    for key, acc in (("containers", None), ("initContainers", init)):
        for container in spec.get(key) or []:
            requests = (container.get("resources") or {}).get("requests") or {}
            for name, default in (("cpu", DEFAULT_MILLI_CPU_REQUEST), ("memory", DEFAULT_MEMORY_REQUEST)):
                amount = canonical(name, requests[name]) if name in requests else default
                if acc is None:
                    total[name] += amount
                else:
                    acc[name] = max(acc[name], amount)
    for name, value in (spec.get("overhead") or {}).items():
        if name in total:
            total[name] += canonical(name, value)
    return {name: max(total[name], init[name]) for name in total}


class Scorer:
    """NodeResourcesFit's Score for one strategy."""

    def __init__(
        self, strategy: str = "LeastAllocated", resources: list[dict] | None = None, shape: list[dict] | None = None
    ):
        self.strategy = strategy
        self.resources = [(r["name"], int(r.get("weight", 1))) for r in (resources or DEFAULT_RESOURCES)]
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        self.shape = [(int(p["utilization"]), int(p["score"]) * scale) for p in shape or []]

    def score(
        self,
        pod: Mapping[str, int],
        pod_nonzero: Mapping[str, int],
        used: Mapping[str, int],
        used_nonzero: Mapping[str, int],
        allocatable: Mapping[str, int],
    ) -> int:
        """The node's score for the pod (higher is better): ``used`` and ``used_nonzero`` are
        the requests of the pods already bound to the node."""
        requested: list[int] = []
        capacity: list[int] = []
        for name, _weight in self.resources:
            want = pod_nonzero[name] if name in pod_nonzero else pod.get(name, 0)
            if want == 0 and is_scalar(name):
                requested.append(0)  # calculateResourceAllocatableRequest: bypass this resource
                capacity.append(0)
                continue
            have = used_nonzero.get(name, 0) if name in pod_nonzero else used.get(name, 0)
            requested.append(have + want)
            capacity.append(allocatable.get(name, 0))
        if self.strategy == "RequestedToCapacityRatio":
            return self._ratio(requested, capacity)
        total = weights = 0
        for (_name, weight), req, alloc in zip(self.resources, requested, capacity, strict=True):
            if alloc == 0:
                continue
            if self.strategy == "MostAllocated":
                value = min(req, alloc) * MAX_NODE_SCORE // alloc
            else:
                value = 0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc
            total += value * weight
            weights += weight
        return total // weights if weights else 0

    def _ratio(self, requested: list[int], capacity: list[int]) -> int:
        total = weights = 0
        for (_name, weight), req, alloc in zip(self.resources, requested, capacity, strict=True):
            if alloc == 0:
                continue
            value = self._broken_linear(100 if req > alloc else req * 100 // alloc)
            if value > 0:  # a resource scoring 0 does not count in the mean
                total += value * weight
                weights += weight
        # math.Round: halves away from zero (Python's round() would go to even)
        return (2 * total + weights) // (2 * weights) if weights else 0

    def _broken_linear(self, utilization: int) -> int:
        """helper.BuildBrokenLinearFunction over the scaled shape."""
        shape = self.shape
        for i, (point, score) in enumerate(shape):
            if utilization <= point:
                if i == 0:
                    return score
                (prev_point, prev_score) = shape[i - 1]
                return prev_score + _go_div((score - prev_score) * (utilization - prev_point), point - prev_point)
        return shape[-1][1]


def _go_div(a: int, b: int) -> int:
    """Go's integer division truncates toward zero (a falling shape gives negative products)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


# --- filters -------------------------------------------------------------------------------------


def tolerates(tolerations: list[dict], taint: Mapping) -> bool:
    """Toleration.ToleratesTaint for any of the pod's tolerations."""
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("key") and tol["key"] != taint.get("key"):
            continue
        operator = tol.get("operator") or "Equal"
        if operator == "Exists" or (operator == "Equal" and (tol.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


def untolerated_taint(
    tolerations: list[dict], taints: list[dict], effects: tuple[str, ...] = ("NoSchedule", "NoExecute")
) -> dict | None:
    """The first taint of those effects the pod does not tolerate (TaintToleration's Filter)."""
    return next((t for t in taints if t.get("effect") in effects and not tolerates(tolerations, t)), None)


def _int64(text: object) -> int | None:
    """strconv.ParseInt(s, 10, 64)."""
    if not isinstance(text, str) or not _INTEGER.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _requirement(expr: Mapping, labels: Mapping[str, str]) -> bool:
    key, op, values = str(expr.get("key") or ""), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        have = _int64(labels.get(key)) if key in labels else None
        want = _int64(values[0]) if len(values) == 1 else None
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _field_requirement(expr: Mapping, name: str) -> bool:
    values = expr.get("values") or []
    if expr.get("key") != "metadata.name" or len(values) != 1:
        return False
    if expr.get("operator") == "In":
        return name == values[0]
    if expr.get("operator") == "NotIn":
        return name != values[0]
    return False


def node_affinity_matches(spec: Mapping, labels: Mapping[str, str], name: str) -> bool:
    """NodeAffinity's Filter: the nodeSelector's labels all match, and (if set) one of the
    required terms does -- a term ANDs its matchExpressions and matchFields (metadata.name);
    an empty term matches no node."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    for term in required.get("nodeSelectorTerms") or []:
        expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not expressions and not fields:
            continue
        if all(_requirement(e, labels) for e in expressions) and all(_field_requirement(f, name) for f in fields):
            return True
    return False


def filter_reason(spec: Mapping, node: Mapping) -> str | None:
    """Why the node is filtered out for the pod (the first failing plugin in kube-scheduler's
    order: NodeUnschedulable, TaintToleration, NodeAffinity), None if it passes them."""
    node_spec = node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if node_spec.get("unschedulable") and not tolerates(
        tolerations, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    ):
        return "node(s) were unschedulable"
    taint = untolerated_taint(tolerations, node_spec.get("taints") or [])
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    meta = node.get("metadata") or {}
    if not node_affinity_matches(spec, meta.get("labels") or {}, meta.get("name", "")):
        return "node(s) didn't match Pod's node affinity/selector"
    return None
