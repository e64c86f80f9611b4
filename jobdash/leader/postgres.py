"""Leader election on PostgreSQL: a lease row with an expiry, renewed at TTL/2.

Leadership is a lease, never a connection: a paused or partitioned leader holds nothing
that stops the next one once its lease has expired by the database's clock, and it
stops acting by its own monotonic clock before that (`valid_until`). Taking the lease is
one conditional statement (`... WHERE expires_at < now() OR holder = me`), and every
new leadership takes its term from a sequence, so terms only grow; the term is the
fencing token every write of the dispatcher carries.

The statements run on a connection of the elector's own with TCP keepalives and
statement and lock timeouts, so a renew never hangs on a dead peer; a lost connection
is simply opened again at the next attempt (it holds no lock).
"""

from __future__ import annotations

import logging
import os
import time

import psycopg

from jobdash.leader.base import BackendError, Leadership

log = logging.getLogger("jobdash.leader")

SCHEMA = """
CREATE SEQUENCE IF NOT EXISTS jobdash_leader_term;
CREATE TABLE IF NOT EXISTS jobdash_leader_lease (
    name text PRIMARY KEY,
    holder text NOT NULL,
    term bigint NOT NULL,
    since timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
)
"""
# Two processes creating the schema at once may collide in the catalog: one of them waits.
SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(hashtext('jobdash_leader_lease'))"

# A new leadership (new term) when the lease is free: never taken, expired, or ours from
# before (a lost renew whose answer never came back).
ACQUIRE = """
INSERT INTO jobdash_leader_lease AS l (name, holder, term, since, expires_at)
VALUES (%(name)s, %(me)s, nextval('jobdash_leader_term'), now(), now() + make_interval(secs => %(ttl)s))
ON CONFLICT (name) DO UPDATE
    SET holder = EXCLUDED.holder, term = EXCLUDED.term, since = EXCLUDED.since, expires_at = EXCLUDED.expires_at
    WHERE l.expires_at < now() OR l.holder = EXCLUDED.holder
RETURNING term, extract(epoch FROM since)
"""

# Only the holder of this very term, and only before its lease has run out.
RENEW = """
UPDATE jobdash_leader_lease SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE name = %(name)s AND holder = %(me)s AND term = %(term)s AND expires_at >= now()
"""

RESIGN = """
UPDATE jobdash_leader_lease SET expires_at = now() - interval '1 second'
WHERE name = %(name)s AND holder = %(me)s AND term = %(term)s
"""

HOLDER = """
SELECT holder, term, extract(epoch FROM since) FROM jobdash_leader_lease
WHERE name = %(name)s AND expires_at >= now()
"""


class PostgresElector:
    def __init__(
        self,
        identity: str,
        *,
        dsn: str | None = None,
        name: str = "jobdash-leader",
        ttl: float = 10.0,
        timeout: float | None = None,
    ) -> None:
        self.identity = identity
        self.dsn = dsn or os.environ.get("DATABASE_URL", "")
        if not self.dsn.startswith(("postgres://", "postgresql://")):
            raise ValueError("postgres leader election needs a postgres:// DSN (DATABASE_URL)")
        self.name = name
        self.ttl = ttl
        # A statement must end well inside the lease, or the answer is worthless.
        self.timeout = timeout if timeout is not None else max(0.5, min(2.0, ttl / 3))
        # Stop acting a little before the lease can have run out: two clocks never agree exactly.
        self.margin = min(1.0, ttl / 10)
        self._conn: psycopg.Connection | None = None
        self._leadership: Leadership | None = None
        self._valid_until = float("-inf")
        self._schema_ready = False

    def _connect(self) -> psycopg.Connection:
        # Keepalives and tcp_user_timeout end a statement stuck on a silent network; the
        # server-side timeouts end one stuck on a lock. Neither outlives the lease.
        probe = max(1, int(self.ttl // 4))
        ms = int(self.timeout * 1000)
        return psycopg.connect(
            self.dsn,
            autocommit=True,
            connect_timeout=max(1, round(self.timeout)),
            keepalives=1,
            keepalives_idle=probe,
            keepalives_interval=probe,
            keepalives_count=3,
            tcp_user_timeout=int(self.ttl * 1000),
            options=f"-c statement_timeout={ms} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={ms * 2}",
        )

    def _execute(self, sql: str, params: dict) -> psycopg.Cursor:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        if not self._schema_ready:
            with self._conn.transaction():
                self._conn.execute(SCHEMA_LOCK)
                self._conn.execute(SCHEMA)
            self._schema_ready = True
        return self._conn.execute(sql, params)

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def _params(self, **more: object) -> dict:
        return {"name": self.name, "me": self.identity, "ttl": self.ttl, **more}

    # --- the Elector protocol ---

    def valid_until(self) -> float:
        """The monotonic time up to which this process may act as leader: the lease was
        renewed (or taken) for `ttl` by a statement sent no earlier than the time recorded."""
        return self._valid_until if self._leadership is not None else float("-inf")

    def try_acquire(self) -> Leadership | None:
        if self._leadership is not None and time.monotonic() < self._valid_until:
            return self._leadership
        self._leadership = None
        sent = time.monotonic()
        try:
            row = self._execute(ACQUIRE, self._params()).fetchone()
        except psycopg.Error as error:
            log.info("postgres acquire failed: %s", error)
            self._drop_connection()
            return None
        if row is None:
            return None  # another holder's lease is still running
        term, since = row
        self._valid_until = sent + self.ttl - self.margin
        self._leadership = Leadership(identity=self.identity, term=int(term), since=float(since))
        return self._leadership

    def renew(self) -> bool:
        leadership = self._leadership
        if leadership is None:
            return False
        sent = time.monotonic()
        try:
            renewed = self._execute(RENEW, self._params(term=leadership.term)).rowcount == 1
        except psycopg.Error as error:
            # Unknown outcome: the lease surely runs until the last renew that landed plus
            # the TTL; valid_until still says so, and the next renew decides.
            log.warning("postgres lease renew failed: %s", error)
            self._drop_connection()
            return time.monotonic() < self._valid_until
        if not renewed:
            log.warning("postgres lease %s lost (expired or taken over)", self.name)
            self._leadership = None
            return False
        self._valid_until = sent + self.ttl - self.margin
        return True

    def resign(self) -> None:
        leadership, self._leadership = self._leadership, None
        if leadership is not None:
            try:
                self._execute(RESIGN, self._params(term=leadership.term))
            except psycopg.Error as error:
                log.info("postgres resign failed (the lease will expire): %s", error)
        self._drop_connection()

    def holder(self) -> Leadership | None:
        try:
            # A short-lived connection of its own: holder() is called from other threads
            # and processes (/status), never on the elector's connection.
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=max(1, round(self.timeout))) as conn:
                row = conn.execute(HOLDER, {"name": self.name}).fetchone()
        except psycopg.errors.UndefinedTable:
            return None  # no leader was ever elected here
        except psycopg.Error as error:
            raise BackendError(f"postgres: {error}") from error
        if row is None:
            return None
        holder, term, since = row
        return Leadership(identity=holder, term=int(term), since=float(since))
