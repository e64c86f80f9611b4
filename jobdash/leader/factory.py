"""The elector the settings describe, for every process that takes part in (or asks
about) the election: run_dispatcher, the beat replicas, and the web's status reads."""

from __future__ import annotations

from django.conf import settings

from jobdash.leader import Elector, make_elector


def elector_options(kind: str) -> dict:
    """The backend's options from settings. PostgreSQL takes its DSN from DATABASE_URL."""
    if kind == "consul":
        return {
            "address": settings.CONSUL_HTTP_ADDR,
            "key": settings.JOBDASH_LEADER_KEY,
            "ttl": settings.JOBDASH_LEADER_TTL_SECONDS,
            "lock_delay": settings.JOBDASH_LEADER_LOCK_DELAY_SECONDS,
        }
    if kind == "postgres":
        return {"ttl": settings.JOBDASH_LEADER_TTL_SECONDS}
    return {}


def elector_from_settings(kind: str | None = None, *, identity: str | None = None) -> Elector:
    """JOBDASH_LEADER's backend (or `kind`'s: "consul", "postgres", "none")."""
    kind = kind or settings.JOBDASH_LEADER
    return make_elector(kind, identity=identity, **elector_options(kind))


def renew_every() -> float:
    """A leader renews at half its lease (JOBDASH_LEADER_TTL_SECONDS), so one late renewal
    does not lose it."""
    return max(0.5, settings.JOBDASH_LEADER_TTL_SECONDS / 2)
