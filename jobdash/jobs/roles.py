"""Who may do what in a namespace. Every path asks this module, through the services and
selectors under it: the REST API (and the CLI and notebook client on it), the pages, the
admin console.

- view: see the namespace's queue and its jobs.
- edit: submit; cancel and reprioritise one's own jobs.
- admin: cancel and reprioritise anyone's job in the namespace.
- staff (is_staff or superuser): admin in every namespace, and the admin console.

Where roles come from is JOBDASH_ROLES_FROM:
- `rbac`: the cluster's RBAC, asked with SubjectAccessReviews as the user's Kubernetes
  identity (cluster/access.py says which verbs make which role), the same answer kubectl gets;
- `membership`: the admin console's Namespace.members and groups, for clusters without
  RBAC: a member edits;
- `both`: the stronger of the two.
A Grant says which source granted a role, for the pages and the 403s.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from jobdash.accounts import identity

from . import cluster_port
from .exceptions import NotMember
from .models import Job, Namespace

VIEW, EDIT, ADMIN = "view", "edit", "admin"
RANK = {"": 0, VIEW: 1, EDIT: 2, ADMIN: 3}


@dataclass(frozen=True)
class Grant:
    role: str  # VIEW | EDIT | ADMIN | "" (none)
    source: str  # what granted it: "staff", "member (admin console)", the RBAC authorizer's reason

    def allows(self, role: str) -> bool:
        return RANK[self.role] >= RANK[role]

    def __str__(self) -> str:
        return f"{self.role or 'no role'}" + (f" ({self.source})" if self.source else "")


NO_ROLE = Grant("", "")


def from_rbac() -> bool:
    return settings.JOBDASH_ROLES_FROM in ("rbac", "both")


def from_membership() -> bool:
    return settings.JOBDASH_ROLES_FROM in ("membership", "both")


def kubernetes_identity(user) -> tuple[str, list[str]]:
    """The user's Kubernetes username and groups, as the cluster's RBAC knows them. Sign-in
    makes people users whose username is their Kubernetes username; their groups are the
    groups its sign-in last named (accounts.identity: OIDC, the proxy, an admission request),
    read once per request's user object; a local account has none."""
    groups = getattr(user, "_kubernetes_groups", None)
    if groups is None:
        groups = identity.groups_of(user) if user.pk else ()
        user._kubernetes_groups = groups
    return user.get_username(), [str(group) for group in groups]


def is_staff(user) -> bool:
    return _active(user) and bool(user.is_staff or user.is_superuser)


def _active(user) -> bool:
    return user is not None and user.is_authenticated and user.is_active


def grant(user, namespace: Namespace) -> Grant:
    """`user`'s role in `namespace` and what granted it."""
    if not _active(user):
        return NO_ROLE
    if is_staff(user):
        return Grant(ADMIN, "staff")
    best = membership(user, namespace) if from_membership() else NO_ROLE
    if from_rbac() and best.role != ADMIN:
        found = rbac(user, namespace.name)
        if RANK[found.role] > RANK[best.role] or not best.role:
            best = found
    return best


def membership(user, namespace: Namespace) -> Grant:
    """The admin console's membership, directly or through a group: a member edits."""
    if Namespace.members.through.objects.filter(namespace_id=namespace.pk, user_id=user.pk).exists():
        return Grant(EDIT, "member (admin console)")
    group = (
        Namespace.groups.through.objects.filter(namespace_id=namespace.pk, group__user=user.pk)
        .values_list("group__name", flat=True)
        .first()
    )
    return Grant(EDIT, f"member through group {group!r} (admin console)") if group is not None else NO_ROLE


def rbac(user, namespace: str) -> Grant:
    username, groups = kubernetes_identity(user)
    granted = cluster_port.rbac_role(username, groups, namespace)
    reason = granted.reason.removeprefix("RBAC: ")
    return Grant(granted.role, reason or ("Kubernetes RBAC" if granted.role else ""))


def rbac_viewable(user) -> list[str]:
    """The names of the managed namespaces the cluster's RBAC lets `user` view."""
    if not from_rbac() or not _active(user):
        return []
    names = Namespace.objects.order_by("name").values_list("name", flat=True)
    return [name for name in names if rbac(user, name).allows(VIEW)]


def may_submit(user, namespace: Namespace, member: bool) -> bool:
    """Submission's check: `member`, the membership its hot query already read."""
    if from_membership() and member:
        return True
    return from_rbac() and rbac(user, namespace.name).allows(EDIT)


def require(user, namespace: Namespace, role: str, doing: str) -> Grant:
    """`user`'s grant in `namespace`, if it allows `role`; else NotMember (403) saying why."""
    granted = grant(user, namespace)
    if not granted.allows(role):
        raise NotMember(f"{doing} needs the {role} role in namespace {namespace.name!r}; yours is {granted}")
    return granted


def owns(user, job: Job) -> bool:
    """Whether `user` submitted `job`: through jobdash, or (a webhook's job, no jobdash user)
    as the Kubernetes user of that name."""
    if job.submitted_by_id is not None:
        return job.submitted_by_id == user.pk
    return bool(job.submitted_by_name) and job.submitted_by_name == kubernetes_identity(user)[0]


def require_on_job(user, job: Job, doing: str) -> Grant:
    """Acting on `job` (cancel, reprioritise): edit on one's own, admin on anyone else's."""
    if owns(user, job):
        return require(user, job.namespace, EDIT, doing)
    whose = job.submitted_by_name or "someone else"
    return require(user, job.namespace, ADMIN, f"{doing} (submitted by {whose}, not you)")


# The cluster deleting on someone's behalf: the garbage collector (an owner was deleted, a
# Katib Trial say) and the namespace controller (the namespace was) run as kube-system's
# service accounts, or as the controller manager itself; system:masters is the cluster's
# superuser group, which RBAC cannot deny either.
CONTROLLERS = "system:serviceaccount:kube-system:"
CONTROLLER_MANAGER = "system:kube-controller-manager"
SUPERUSERS = "system:masters"


def require_on_job_in_cluster(user, groups: Sequence[str], job: Job, doing: str) -> None:
    """require_on_job for a write the API server has already authorized (a kubectl DELETE of
    the job's object or QueuedJob): its owner may (RBAC let them delete there), and so may
    the cluster itself (CONTROLLERS, SUPERUSERS); anyone else needs the admin role, asked
    with the request's own groups. `user`: the request's (accounts.identity.admission_subject),
    None for nobody. Raises NotMember saying why."""
    if user is not None:
        name = user.get_username()
        if name.startswith(CONTROLLERS) or name == CONTROLLER_MANAGER or SUPERUSERS in groups:
            return
        user._kubernetes_groups = [str(group) for group in groups]  # the request's, not a sign-in's
        if owns(user, job):
            return
    whose = job.submitted_by_name or "someone else"
    require(user, job.namespace, ADMIN, f"{doing} (submitted by {whose}, not you)")


def may_act_on(user, job: Job) -> bool:
    """Whether require_on_job would let `user` act on `job` (the pages show their buttons by it)."""
    return grant(user, job.namespace).allows(EDIT if owns(user, job) else ADMIN)
