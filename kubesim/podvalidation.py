"""The API server's pod rules that concern scheduling (pkg/apis/core/validation, v1.30).

On create: ``spec.schedulingGates`` names are unique qualified names, a pod with gates
may not name its node, tolerations and required node affinity are well formed. On
update (ValidatePodUpdate): a pod's spec is immutable but for container images,
activeDeadlineSeconds (only lowered), tolerations (only added; tolerationSeconds may
change), schedulingGates (only removed) and -- while the pod is still gated (KEP-3838) --
additions to nodeSelector and to required node affinity. Everything else is refused with
the API server's "pod updates may not change fields other than ..." (its diff is kubesim's,
one line per changed field, not go-cmp's).

Also the API server's own mutations of a new pod: DefaultTolerationSeconds (tolerations
of the not-ready and unreachable NoExecute taints for 300 s) and the PodScheduled=False
SchedulingGated condition of a gated pod (the pod strategy's PrepareForCreate).
"""

from __future__ import annotations

import copy
import json
import re

from .validation import DNS1123_SUBDOMAIN, cause, required

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300
SCHEDULING_GATED = "SchedulingGated"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
UPDATABLE_FIELDS = ",".join(
    (
        "`spec.containers[*].image`",
        "`spec.initContainers[*].image`",
        "`spec.activeDeadlineSeconds`",
        "`spec.tolerations` (only additions to existing tolerations)",
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
    )
)
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_QUALIFIED_NAME_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
    "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def shown(value: object) -> str:
    """A value as field.Invalid prints it: strings quoted, the rest as JSON."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def invalid(path: str, value: object, message: str) -> dict:
    return cause(path, f"Invalid value: {shown(value)}: {message}")


def forbidden(path: str, message: str) -> dict:
    return cause(path, f"Forbidden: {message}", "FieldValueForbidden")


def qualified_name_errors(name: object) -> list[str]:
    """IsQualifiedName: an optional DNS subdomain prefix and '/', then a name of 63 at most."""
    if not isinstance(name, str):
        return [f"name part {_QUALIFIED_NAME_MESSAGE}"]
    parts = name.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {_QUALIFIED_NAME_MESSAGE} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    errors: list[str] = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix):
            errors.append(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
                "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            )
    short = parts[-1]
    if not short:
        errors.append("name part must be non-empty")
    elif len(short) > 63:
        errors.append("name part must be no more than 63 characters")
    if short and not _QUALIFIED_NAME.match(short):
        errors.append(f"name part {_QUALIFIED_NAME_MESSAGE}")
    return errors


# --- create (and every write): the shape of the scheduling fields ------------------------------


def validate_scheduling(path: str, spec: dict) -> list[dict]:
    """validateSchedulingGates, ValidateTolerations and the node affinity of validatePodSpec."""
    causes: list[dict] = []
    seen: set[str] = set()
    gates = spec.get("schedulingGates") or []
    for i, gate in enumerate(gates if isinstance(gates, list) else []):
        name = gate.get("name") if isinstance(gate, dict) else None
        causes += [invalid(f"{path}.schedulingGates[{i}]", name, e) for e in qualified_name_errors(name)]
        if name in seen:
            causes.append(
                cause(f"{path}.schedulingGates[{i}]", f"Duplicate value: {shown(name)}", "FieldValueDuplicate")
            )
        if isinstance(name, str):
            seen.add(name)
    tolerations = spec.get("tolerations") or []
    for i, toleration in enumerate(tolerations if isinstance(tolerations, list) else []):
        causes += _toleration_errors(f"{path}.tolerations[{i}]", toleration if isinstance(toleration, dict) else {})
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    selector = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if selector is not None:
        causes += _node_selector_errors(
            f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", selector
        )
    return causes


def validate_pod_create(spec: dict) -> list[dict]:
    """ValidatePodCreate's rule for gates: a gated pod cannot be given its node."""
    if spec.get("nodeName") and spec.get("schedulingGates"):
        return [forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared")]
    return []


def _toleration_errors(path: str, toleration: dict) -> list[dict]:
    causes: list[dict] = []
    key, operator = toleration.get("key") or "", toleration.get("operator") or ""
    value, effect = toleration.get("value") or "", toleration.get("effect") or ""
    if key:
        causes += [invalid(f"{path}.key", key, e) for e in qualified_name_errors(key)]
    elif operator != "Exists":
        causes.append(
            invalid(
                f"{path}.operator",
                operator,
                'operator must be Exists when `key` is empty, which means "match all values and all keys"',
            )
        )
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        causes.append(invalid(f"{path}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
    if operator in ("", "Equal"):
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(
                invalid(
                    f"{path}.value",
                    value,
                    "a valid label must be an empty string or consist of alphanumeric characters",
                )
            )
    elif operator == "Exists":
        if value:
            causes.append(invalid(f"{path}.operator", toleration, "value must be empty when `operator` is 'Exists'"))
    else:
        causes.append(
            cause(
                f"{path}.operator",
                f'Unsupported value: {shown(operator)}: supported values: "Equal", "Exists"',
                "FieldValueNotSupported",
            )
        )
    if effect and effect not in _EFFECTS:
        supported = ", ".join(f'"{e}"' for e in _EFFECTS)
        causes.append(
            cause(
                f"{path}.effect",
                f"Unsupported value: {shown(effect)}: supported values: {supported}",
                "FieldValueNotSupported",
            )
        )
    return causes


def _node_selector_errors(path: str, selector: object) -> list[dict]:
    """ValidateNodeSelector: at least one term; each requirement as its operator demands."""
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
    if not terms:
        return [required(f"{path}.nodeSelectorTerms", "Required value: must have at least one node selector term")]
    causes: list[dict] = []
    for i, term in enumerate(terms):
        where = f"{path}.nodeSelectorTerms[{i}]"
        term = term if isinstance(term, dict) else {}
        for j, expr in enumerate(term.get("matchExpressions") or []):
            causes += _requirement_errors(f"{where}.matchExpressions[{j}]", expr if isinstance(expr, dict) else {})
        for j, expr in enumerate(term.get("matchFields") or []):
            causes += _field_requirement_errors(f"{where}.matchFields[{j}]", expr if isinstance(expr, dict) else {})
    return causes


def _requirement_errors(path: str, expr: dict) -> list[dict]:
    operator, values = expr.get("operator"), expr.get("values") or []
    causes: list[dict] = []
    if operator in ("In", "NotIn"):
        if not values:
            causes.append(
                required(f"{path}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
            )
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            causes.append(
                forbidden(f"{path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
            )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            causes.append(
                required(
                    f"{path}.values", "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
                )
            )
    else:
        causes.append(invalid(f"{path}.operator", operator, "not a valid selector operator"))
    causes += [invalid(f"{path}.key", expr.get("key"), e) for e in qualified_name_errors(expr.get("key"))]
    return causes


def _field_requirement_errors(path: str, expr: dict) -> list[dict]:
    operator, values = expr.get("operator"), expr.get("values") or []
    causes: list[dict] = []
    if operator in ("In", "NotIn"):
        if len(values) != 1:
            causes.append(
                required(
                    f"{path}.values",
                    "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                )
            )
    else:
        causes.append(invalid(f"{path}.operator", operator, "not a valid selector operator"))
    if expr.get("key") != "metadata.name":
        causes.append(invalid(f"{path}.key", expr.get("key"), "not a valid field selector key"))
    return causes


# --- the API server's mutations of a new pod ------------------------------------------------------


def default_tolerations(spec: dict) -> None:
    """The DefaultTolerationSeconds admission plugin: tolerate not-ready and unreachable for 300 s."""
    tolerations = spec.get("tolerations") or []

    def tolerates(taint: str) -> bool:
        return any(
            isinstance(t, dict) and (t.get("key") in (taint, None, "")) and (t.get("effect") in ("NoExecute", None, ""))
            for t in tolerations
        )

    added = [
        {"key": taint, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}
        for taint in (NOT_READY_TAINT, UNREACHABLE_TAINT)
        if not tolerates(taint)
    ]
    if added:
        spec["tolerations"] = list(tolerations) + added


def gated_condition(pod: dict) -> None:
    """applySchedulingGatedCondition: a pod created with gates reads PodScheduled=False/SchedulingGated."""
    if not (pod.get("spec") or {}).get("schedulingGates"):
        return
    status = pod.setdefault("status", {})
    conditions = status.get("conditions") or []
    if any(c.get("type") == "PodScheduled" for c in conditions):
        return
    status["conditions"] = conditions + [
        {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": None,
            "reason": SCHEDULING_GATED,
            "message": GATED_MESSAGE,
        }
    ]


# --- update: ValidatePodUpdate's spec rules -------------------------------------------------------


def _norm(value: object) -> object:
    """Semantic.DeepEqual treats nil and empty slices and maps alike: drop them."""
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def validate_pod_update(old_pod: dict, new_pod: dict) -> list[dict]:
    old, new = old_pod.get("spec") or {}, new_pod.get("spec") or {}
    causes: list[dict] = []
    for key in ("containers", "initContainers"):
        olds, news = old.get(key) or [], new.get(key) or []
        if len(olds) != len(news):
            return causes + [forbidden(f"spec.{key}", "pod updates may not add or remove containers")]
        for i, container in enumerate(news):
            image = container.get("image") if isinstance(container, dict) else None
            if not image:
                causes.append(required(f"spec.{key}[{i}].image"))
            elif image.strip() != image:
                causes.append(invalid(f"spec.{key}[{i}].image", image, "must not have leading or trailing whitespace"))
    deadline, old_deadline = new.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds")
    if deadline is not None:
        if old_deadline is not None and old_deadline < deadline:
            return causes + [
                invalid("spec.activeDeadlineSeconds", deadline, "must be less than or equal to previous value")
            ]
    elif old_deadline is not None:
        causes.append(
            invalid("spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value")
        )
    causes += _only_added_tolerations(new.get("tolerations") or [], old.get("tolerations") or [])
    causes += _only_deleted_gates(new.get("schedulingGates") or [], old.get("schedulingGates") or [])
    if _norm(new) == _norm(old):
        return causes
    munged = copy.deepcopy(new)
    for key in ("containers", "initContainers"):
        for container, before in zip(munged.get(key) or [], old.get(key) or [], strict=False):
            container["image"] = before.get("image")
    munged["activeDeadlineSeconds"] = old_deadline
    munged["schedulingGates"] = old.get("schedulingGates")
    munged["tolerations"] = old.get("tolerations")
    grace = old.get("terminationGracePeriodSeconds")
    if grace is not None and grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = grace
    if old.get("schedulingGates"):
        causes += _gated_mutations(munged, old)
    if _norm(munged) != _norm(old):
        causes.append(
            forbidden("spec", f"pod updates may not change fields other than {UPDATABLE_FIELDS}\n{_diff(old, munged)}")
        )
    return causes


def _only_added_tolerations(new: list, old: list) -> list[dict]:
    """validateOnlyAddedTolerations: every old toleration is still there, but for its tolerationSeconds."""
    for before in old:
        if not any(_norm({**before, "tolerationSeconds": t.get("tolerationSeconds")}) == _norm(t) for t in new):
            return [
                forbidden("spec.tolerations", "existing toleration can not be modified except its tolerationSeconds")
            ]
    return []


def _only_deleted_gates(new: list, old: list) -> list[dict]:
    """validateOnlyDeletedSchedulingGates: a gate can be removed, never added."""
    before = {g.get("name") for g in old if isinstance(g, dict)}
    return [
        forbidden(
            f"spec.schedulingGates[{i}].name",
            f"only deletion is allowed, but found new scheduling gate '{g.get('name')}'",
        )
        for i, g in enumerate(new)
        if isinstance(g, dict) and g.get("name") not in before
    ]


def _gated_mutations(munged: dict, old: dict) -> list[dict]:
    """KEP-3838: a gated pod's nodeSelector and required node affinity may only narrow; the
    accepted changes are put back to the old values in ``munged`` so the rest compares."""
    causes: list[dict] = []
    if _norm(munged.get("nodeSelector")) != _norm(old.get("nodeSelector")):
        new_selector, old_selector = munged.get("nodeSelector") or {}, old.get("nodeSelector") or {}
        if any(new_selector.get(k) != v for k, v in old_selector.items()):
            causes.append(
                invalid(
                    "spec.nodeSelector",
                    new_selector,
                    "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
                )
            )
        munged["nodeSelector"] = old.get("nodeSelector")
    old_affinity = old.get("affinity") or None
    old_na = (old_affinity or {}).get("nodeAffinity")
    new_na = (munged.get("affinity") or {}).get("nodeAffinity")
    if _norm(old_na) != _norm(new_na):
        causes += _node_affinity_mutation(new_na, old_na)
        affinity = munged.get("affinity")
        if not affinity and old_na is not None:
            munged["affinity"] = {"nodeAffinity": old_na}
        elif (
            affinity
            and old_affinity is None
            and not affinity.get("podAffinity")
            and not affinity.get("podAntiAffinity")
        ):
            munged["affinity"] = None
        elif affinity:
            munged["affinity"] = {**affinity, "nodeAffinity": old_na}
    return causes


def _node_affinity_mutation(new_na: dict | None, old_na: dict | None) -> list[dict]:
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    old_required = (old_na or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if old_required is None:
        return []
    old_terms = old_required.get("nodeSelectorTerms") or []
    new_terms = ((new_na or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms"
    ) or []
    if old_terms and len(old_terms) != len(new_terms):
        return [invalid(path, new_terms, "no additions/deletions to non-empty NodeSelectorTerms list are allowed")]
    return [
        invalid(f"{path}[{i}]", new_terms[i], "only additions are allowed (no mutations or deletions)")
        for i, old_term in enumerate(old_terms)
        if not _only_additions(new_terms[i], old_term)
    ]


def _only_additions(new_term: dict, old_term: dict) -> bool:
    """validateNodeSelectorTermHasOnlyAdditions: the old requirements stay first, unchanged."""
    if not old_term.get("matchExpressions") and not old_term.get("matchFields"):
        if new_term.get("matchExpressions") or new_term.get("matchFields"):
            return False
    for key in ("matchExpressions", "matchFields"):
        before, after = old_term.get(key) or [], new_term.get(key) or []
        if len(after) < len(before) or _norm(after[: len(before)]) != _norm(before):
            return False
    return True


def _diff(old: dict, new: dict) -> str:
    """What changed, one field a line (the API server prints go-cmp's diff of core.PodSpec)."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        before, after = _norm(old.get(key)), _norm(new.get(key))
        if before != after:
            lines.append(f"- \t{key}: {shown(before)},")
            lines.append(f"+ \t{key}: {shown(after)},")
    lines.append("  }")
    return "\n".join(lines)
