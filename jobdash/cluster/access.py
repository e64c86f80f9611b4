"""Roles in a namespace as the cluster's RBAC grants them, asked with SubjectAccessReviews
through the gateway (jobdash/jobs/roles.py decides what each role may do).

Three questions, the most powerful first; the first one allowed is the role:
- admin: `create rolebindings` (rbac.authorization.k8s.io) in the namespace. The default
  `admin` ClusterRole has it and `edit` has not (it is how a namespace's owner lets others
  in: Kubeflow's Profile contributors are RoleBindings); `edit` has `delete resourcequotas`
  neither, but a quota is no person's business in a namespace, while sharing it is.
- edit: `create` on the registry's first job kind (kinds.keys()[0]), which a namespace's
  `edit` and Kubeflow's `kubeflow-edit` grant with every kind they manage.
- view: `list` on that kind, which `view` and `kubeflow-view` grant.

Answers are kept JOBDASH_ROLES_CACHE_SECONDS per (user, groups, namespace) and all dropped
when a RoleBinding or ClusterRoleBinding changes (the gateway's watch), so a binding added
or removed counts within about a second; the expiry covers a Role's rules changing.
"""

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.conf import settings

from . import kinds
from .gateway import ClusterGateway, GatewayError

log = logging.getLogger(__name__)

RBAC_GROUP = "rbac.authorization.k8s.io"
UNREADABLE_PAUSE_SECONDS = 2.0


@dataclass(frozen=True)
class Granted:
    role: str  # "admin" | "edit" | "view" | "" (none)
    reason: str  # what granted it, in the authorizer's words; or why none could be asked
    unreadable: bool = False  # the cluster could not be asked: not cached, asked again next time


def probes() -> list[tuple[str, str, str, str]]:
    """(role, verb, API group, resource), most powerful first."""
    group, _version, plural = kinds.group_version_plural(kinds.keys()[0])
    return [
        ("admin", "create", RBAC_GROUP, "rolebindings"),
        ("edit", "create", group, plural),
        ("view", "list", group, plural),
    ]


class RbacRoles:
    def __init__(self, gateway: Callable[[], ClusterGateway], ttl: float, clock: Callable[[], float] = time.monotonic):
        self._make_gateway = gateway
        self._gateway: ClusterGateway | None = None
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._starting = threading.Lock()
        self._answers: dict[tuple[str, tuple[str, ...], str], tuple[float, Granted]] = {}
        # Bumped by every binding change: an answer asked before it is not stored after it.
        self._generation = 0
        self._down: tuple[float, Granted] | None = None  # until when, and the failure to repeat

    def role(self, user: str, groups: Sequence[str], namespace: str) -> Granted:
        key = (user, tuple(sorted(groups)), namespace)
        now = self._clock()
        with self._lock:
            hit = self._answers.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
            generation = self._generation
            down = self._down
        if down is not None and down[0] > now:
            # The cluster failed a moment ago: a page of many namespaces does not wait out
            # every one's retries.
            return down[1]
        granted = self._ask(user, list(key[1]), namespace)
        if granted.unreadable:
            with self._lock:
                self._down = (now + UNREADABLE_PAUSE_SECONDS, granted)
        if not granted.unreadable:
            with self._lock:
                if generation == self._generation:
                    self._answers[key] = (now + self._ttl, granted)
        return granted

    def forget(self) -> None:
        with self._lock:
            self._answers.clear()
            self._generation += 1
            self._down = None

    def stop(self) -> None:
        """Stop the watch and forget every answer; the next question starts both again."""
        with self._starting:
            gateway, self._gateway = self._gateway, None
        if gateway is not None:
            gateway.stop()
        self.forget()

    def _ask(self, user: str, groups: list[str], namespace: str) -> Granted:
        try:
            gateway = self._cluster()
            for role, verb, group, resource in probes():
                access = gateway.review_access(user, groups, verb, group, resource, namespace)
                if access.allowed:
                    return Granted(role, access.reason)
        except GatewayError as error:
            log.warning("roles: cannot ask the cluster about %s in %s: %s", user, namespace, error)
            return Granted("", f"the cluster could not be asked: {error}", unreadable=True)
        return Granted("", "")

    def _cluster(self) -> ClusterGateway:
        # One gateway and one watch per process, however many request threads ask first.
        with self._starting:
            if self._gateway is None:
                try:
                    gateway = self._make_gateway()
                except Exception as error:  # no kubeconfig, an unreadable one: the cluster cannot be asked
                    raise GatewayError(f"no cluster client: {error}") from error
                # Not waited for: its first list drops whatever was answered before it.
                # Until it runs (refused, the cluster down) answers still expire after the TTL.
                gateway.watch_bindings(self.forget)
                self._gateway = gateway
            return self._gateway


_current: tuple[tuple, RbacRoles] | None = None
_current_lock = threading.Lock()


def from_settings() -> RbacRoles:
    """The process's one cache, rebuilt when the cluster settings change (tests switch clusters)."""
    global _current
    wanted = (settings.JOBDASH_CLUSTER, settings.KUBECONFIG, settings.JOBDASH_ROLES_CACHE_SECONDS)
    with _current_lock:
        if _current is None or _current[0] != wanted:
            if _current is not None:
                _current[1].stop()
            _current = (wanted, RbacRoles(_gateway_from_settings, settings.JOBDASH_ROLES_CACHE_SECONDS))
        return _current[1]


def _gateway_from_settings() -> ClusterGateway:
    from .factory import gateway_from_settings

    return gateway_from_settings()
