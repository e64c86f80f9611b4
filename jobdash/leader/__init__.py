"""Leader election: one beat replica emits admission cycles; the term fences the rest.

elector = make_elector("consul", key="jobdash/leader", ttl=10)
loop = LeaderLoop(elector, on_elected=..., on_lost=..., renew_every=5, retry_every=1)
loop.start(); ...; loop.leadership  # Leadership(identity, term, since) or None

From settings (JOBDASH_LEADER, JOBDASH_LEADER_TTL_SECONDS, ...), as the processes do:
loop = LeaderLoop(elector_from_settings(), renew_every=renew_every(), ...)  # leader.factory
"""

from __future__ import annotations

from jobdash.leader.base import BackendError, Elector, LeaderLoop, Leadership, default_identity

__all__ = ["BackendError", "Elector", "LeaderLoop", "Leadership", "default_identity", "make_elector"]


def make_elector(kind: str, *, identity: str | None = None, **options) -> Elector:
    """Build the backend named by JOBDASH_LEADER: "consul", "postgres" or "none".

    consul:   address (CONSUL_HTTP_ADDR), key, ttl (s), lock_delay (s), timeout (s)
    postgres: dsn (DATABASE_URL), name, ttl (s, the lease), timeout (s)
    """
    identity = identity or default_identity()
    kind = (kind or "none").strip().lower()
    # Imported on demand: embedded mode needs neither py-consul nor a PostgreSQL driver.
    if kind == "consul":
        from jobdash.leader.consul import ConsulElector

        return ConsulElector(identity, **options)
    if kind == "postgres":
        from jobdash.leader.postgres import PostgresElector

        return PostgresElector(identity, **options)
    if kind == "none":
        from jobdash.leader.none import NoneElector

        return NoneElector(identity, **options)
    raise ValueError(f"unknown leader election backend {kind!r}: expected consul, postgres or none")
