"""Who a person is, the same wherever they come from: an OIDC sign-in, the authenticating
proxy's header (Kubeflow's `kubeflow-userid`), an admission request's userInfo. Each
becomes an Identity whose username is the person's Kubernetes username, mapped as
kube-apiserver maps the same token (`--oidc-username-claim/-prefix`,
`--oidc-groups-claim/-prefix`), and the jobdash User of that username, created on first
sight with an unusable password. So the person who creates a job with kubectl is the user
who sees it under "my jobs" and cancels it in the UI, the API and the CLI.
"""

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import IntegrityError, transaction

from .models import PlatformIdentity

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
# Django's username column; a longer Kubernetes username cannot be one jobdash user.
MAX_USERNAME = 150


class Refused(Exception):
    """The identity cannot be a jobdash user; the message says why (shown on 403s, logged)."""


@dataclass(frozen=True)
class Identity:
    username: str  # the Kubernetes username
    groups: tuple[str, ...]
    source: str  # oidc | proxy | admission

    @property
    def is_service_account(self) -> bool:
        return self.username.startswith(SERVICE_ACCOUNT_PREFIX)


def _person(username: str, groups: Iterable[str], source: str) -> Identity:
    """A person signed in by the platform. Like kube-apiserver, refuse a name in the
    `system:` space: an OIDC token or a proxy header must not pass for a service account or
    a cluster component (set a prefix if your provider's names can look like that)."""
    username = username.strip()
    if not username:
        raise Refused("no username")
    if username.startswith("system:"):
        raise Refused(f"{username!r} is in the reserved system: space")
    if len(username) > MAX_USERNAME:
        raise Refused(f"the username is longer than {MAX_USERNAME} characters")
    return Identity(username, tuple(dict.fromkeys(g for g in groups if g)), source)


def from_oidc_claims(claims: Mapping[str, Any]) -> Identity:
    """The ID token's (or userinfo's) claims as kube-apiserver reads them."""
    claim = settings.JOBDASH_OIDC_USERNAME_CLAIM
    value = claims.get(claim)
    if not isinstance(value, str) or not value:
        raise Refused(f"the token has no {claim!r} claim")
    if claim == "email" and claims.get("email_verified") is False:
        # kube-apiserver refuses an unverified email as a username too
        raise Refused("the token's email is not verified")
    groups = claims.get(settings.JOBDASH_OIDC_GROUPS_CLAIM) or []
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise Refused(f"the token's {settings.JOBDASH_OIDC_GROUPS_CLAIM!r} claim is not a list of strings")
    prefix = settings.JOBDASH_OIDC_GROUPS_PREFIX
    return _person(settings.JOBDASH_OIDC_USERNAME_PREFIX + value, [prefix + g for g in groups], "oidc")


def from_proxy(user_header: str, groups_header: str = "") -> Identity:
    """Kubeflow's authenticating proxy: the user id as the Profile's RoleBindings name it
    (after stripping JOBDASH_PROXY_USERID_PREFIX, as Kubeflow's USERID_PREFIX), groups
    comma-separated."""
    prefix = settings.JOBDASH_PROXY_USERID_PREFIX
    username = user_header.strip()
    if prefix and username.startswith(prefix):
        username = username[len(prefix) :]
    return _person(username, [g.strip() for g in groups_header.split(",")], "proxy")


def from_admission(username: str, groups: Iterable[str]) -> Identity | None:
    """An admission request's userInfo, authenticated by the API server: any username,
    service accounts included. None for nobody (anonymous, or a name too long to keep)."""
    if not username or username == "system:anonymous" or len(username) > MAX_USERNAME:
        return None
    return Identity(username, tuple(groups), "admission")


def admission_owner(username: str, groups: Iterable[str]) -> Any:
    """The user whose job an admission request creates; None for nobody (anonymous, a
    deactivated user: the job is queued all the same, owned by no one)."""
    who = from_admission(username, groups)
    if who is None:
        return None
    try:
        return user_for(who)
    except Refused as error:
        log.info("admission by %r: no owner (%s)", username, error)
        return None


def admission_subject(username: str, groups: Iterable[str]) -> Any:
    """The user an admission request acts as, for asking what they may do: the jobdash user
    of that name, else an unsaved one of that name (nothing is written: a dry run asks too);
    None for nobody (anonymous)."""
    who = from_admission(username, groups)
    if who is None:
        return None
    User = get_user_model()
    return User.objects.filter(username=who.username).first() or User(username=who.username)


def user_for(identity: Identity) -> Any:
    """The jobdash user of `identity`, created on first sight (unusable password: the
    platform signs them in, not jobdash), its groups recorded.

    A sign-in (OIDC, proxy) never takes over a local account that has a password: a break-
    glass admin named like someone at the provider stays the admin's. An admission request
    does link to one (it only makes the user the owner of the job they created: `make run`'s
    demo member is the same person in kubectl and in the UI)."""
    User = get_user_model()
    # A plain read first: on the webhook's path the user almost always exists, and a
    # savepoint around every lookup would cost two more round trips.
    user, created = User.objects.filter(username=identity.username).first(), False
    if user is None:
        try:
            with transaction.atomic():
                user = User.objects.create(username=identity.username, password=make_password(None))
                created = True
        except IntegrityError:  # made by a concurrent first sight
            user = User.objects.get(username=identity.username)
    if not created and identity.source != "admission" and user.has_usable_password():
        raise Refused(f"{identity.username!r} is a local jobdash account; sign in with its password")
    if not user.is_active:
        raise Refused(f"{identity.username!r} is deactivated")
    _record(user, identity)
    return user


def _record(user: Any, identity: Identity) -> None:
    """Keep what the platform said last; a write only when it changed (the proxy asks on
    every request)."""
    groups = list(identity.groups)
    found = PlatformIdentity.objects.filter(user=user).first()
    if found is None:
        PlatformIdentity.objects.get_or_create(user=user, defaults={"groups": groups, "source": identity.source})
    elif identity.source != "admission" and (found.groups != groups or found.source != identity.source):
        # An admission request's groups are the kubectl identity's, not a sign-in's: they
        # only fill in a user the platform has not signed in yet.
        found.groups, found.source = groups, identity.source
        found.save(update_fields=["groups", "source", "seen_at"])


def groups_of(user) -> tuple[str, ...]:
    """The platform groups last recorded for `user` (none for a local account)."""
    found = PlatformIdentity.objects.filter(user_id=user.pk).values_list("groups", flat=True).first()
    return tuple(found or ())
