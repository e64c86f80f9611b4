"""A job's priority: from admin-governed PriorityClasses (the cluster's, read through the
gateway only when a submission involves one) within each namespace's limit, or a staff
override. The planner orders by the number; aging, backfill and fair share work on it."""

import re

from . import selectors
from .cluster_port import PriorityClass, PriorityClassUnreadable, PrioritySource, priority_source
from .exceptions import ClusterUnavailable, Forbidden, InvalidInput
from .models import Namespace

PRIORITY_MIN, PRIORITY_MAX = -1_000_000, 1_000_000
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _priorities() -> PrioritySource:
    """Built per submission; it reaches the cluster only if a priority class is involved."""
    return priority_source()


def priority_sources() -> PrioritySource:
    """The cluster's classes for one request: each is read once, however many jobs name it."""
    return _priorities()


def validate_priority(value) -> int:
    """Accepts ints and decimal strings (query parameters); anything else names the field."""
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise InvalidInput.at("priority", f"must be an integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput.at("priority", "must be an integer")
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise InvalidInput.at("priority", f"must be between {PRIORITY_MIN} and {PRIORITY_MAX}")
    return value


def pod_priority_class_names(document, path: str = "") -> list[tuple[str, str]]:
    """(path, name) of every `priorityClassName` of a pod spec in a parsed manifest, of
    any kind: a pod spec is an object with `containers`, wherever the kind keeps it."""
    found: list[tuple[str, str]] = []
    if isinstance(document, dict):
        if "containers" in document and "priorityClassName" in document:
            found.append((f"{path}.priorityClassName" if path else "priorityClassName", document["priorityClassName"]))
        for key, value in document.items():
            if isinstance(value, dict | list):
                found.extend(pod_priority_class_names(value, f"{path}.{key}" if path else str(key)))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found.extend(pod_priority_class_names(value, f"{path}[{index}]"))
    return found


def _is_staff(user) -> bool:
    return user is not None and selectors.sees_all_namespaces(user)


def _priority_class(source: PrioritySource, path: str, name: str) -> PriorityClass:
    if len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
        raise InvalidInput.at(path, f"{name!r} is not a priority class name (a lowercase RFC 1123 subdomain)")
    try:
        found = source.get(name)
    except PriorityClassUnreadable as error:
        raise ClusterUnavailable(path, f"{error}; try again") from None
    if found is None:
        raise InvalidInput.at(path, f"priority class {name!r} does not exist in the cluster")
    return found


def _check_limit(source: PrioritySource, ns: Namespace, path: str, chosen: PriorityClass) -> None:
    """A member (or a cluster identity) may not ask for more than the namespace's max class."""
    if not ns.max_priority_class:
        return
    try:
        limit = source.get(ns.max_priority_class)
    except PriorityClassUnreadable as error:
        raise ClusterUnavailable(path, f"{error}; try again") from None
    limit_value = limit.value if limit is not None else PRIORITY_MIN
    if chosen.value > limit_value:
        shown = str(limit) if limit is not None else f"{ns.max_priority_class!r} (missing from the cluster)"
        raise Forbidden(path, f"priority class {chosen} is above {ns.name}'s limit {shown}")


def resolve_priority(
    user,
    ns: Namespace,
    parsed,
    priority_class: str = "",
    priority=0,
    *,
    source: PrioritySource | None = None,
) -> tuple[int, str]:
    """A job's (priority, priority class): the class named explicitly, else the pods'
    priorityClassName, else the namespace's default class, else none (priority 0). The
    priority is the class's value; a numeric priority is a staff override that wins.
    `source`: the classes read so far (a bulk submission reads each class once)."""
    priority = validate_priority(priority)
    staff = _is_staff(user)
    if priority != 0 and not staff:
        raise Forbidden("priority", "only staff may set a numeric priority; choose a priority_class")
    if not isinstance(priority_class, str):
        raise InvalidInput.at("priority_class", "must be a string")
    if source is None:
        source = _priorities()
    chosen: PriorityClass | None = None
    if priority_class:
        path = "priority_class"
        chosen = _priority_class(source, path, priority_class)
    else:
        named = pod_priority_class_names(parsed)
        for path, name in named:
            if not isinstance(name, str) or not name:
                raise InvalidInput.at(path, "must be a priority class name")
            if name != named[0][1]:
                raise InvalidInput.at(path, f"is {name!r} but {named[0][0]} is {named[0][1]!r}: one class per job")
        if named:
            path = named[0][0]
            chosen = _priority_class(source, path, named[0][1])
    if chosen is not None:
        if not staff:
            _check_limit(source, ns, path, chosen)
    elif ns.default_priority_class:
        chosen = _priority_class(source, "priority_class", ns.default_priority_class)
    if priority != 0:
        return priority, chosen.name if chosen else ""
    return (chosen.value, chosen.name) if chosen else (0, "")


def priority_classes() -> list[PriorityClass]:
    """Every class in the cluster, lowest first; [] when the cluster cannot be asked (the submit page's select)."""
    try:
        return _priorities().all()
    except PriorityClassUnreadable:
        return []


def allowed_class(user, ns: Namespace, path: str, name: str) -> PriorityClass:
    """The class `name`, if `user` may give it to a job of `ns` (staff: any)."""
    source = _priorities()
    chosen = _priority_class(source, path, name)
    if not _is_staff(user):
        _check_limit(source, ns, path, chosen)
    return chosen
