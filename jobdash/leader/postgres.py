"""Leader election on PostgreSQL: a session-level advisory lock on a dedicated connection.

The lock lives exactly as long as the connection, so a lost connection is lost
leadership. Each new leader takes its term from a sequence (nextval never goes back)
and records itself, with its backend pid, in `jobdash_leader` so that any process can
tell who leads; holder() only believes a row whose backend still holds the lock.

Do not put a transaction-pooling proxy (PgBouncer in transaction mode) between this
connection and the server: session-level advisory locks need a real session.
"""

from __future__ import annotations

import hashlib
import logging
import os

import psycopg

from jobdash.leader.base import BackendError, Leadership

log = logging.getLogger("jobdash.leader")

# Only the lock holder runs this, so concurrent CREATE ... IF NOT EXISTS cannot race.
SCHEMA = """
CREATE SEQUENCE IF NOT EXISTS jobdash_leader_term;
CREATE TABLE IF NOT EXISTS jobdash_leader (
    name text PRIMARY KEY,
    identity text NOT NULL,
    term bigint NOT NULL,
    since timestamptz NOT NULL,
    pid integer NOT NULL
)
"""

RECORD = """
INSERT INTO jobdash_leader (name, identity, term, since, pid)
VALUES (%(name)s, %(identity)s, nextval('jobdash_leader_term'), now(), pg_backend_pid())
ON CONFLICT (name) DO UPDATE
    SET identity = EXCLUDED.identity, term = EXCLUDED.term, since = EXCLUDED.since, pid = EXCLUDED.pid
RETURNING term, extract(epoch FROM since)
"""

# A bigint advisory lock shows in pg_locks as classid = high 32 bits, objid = low 32
# bits, objsubid = 1. The pid match makes sure the recorded leader is the holder.
HOLDER = """
SELECT l.identity, l.term, extract(epoch FROM l.since)
FROM jobdash_leader l
WHERE l.name = %(name)s AND EXISTS (
    SELECT 1 FROM pg_locks k
    WHERE k.locktype = 'advisory' AND k.granted AND k.pid = l.pid
      AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND k.classid::bigint = %(classid)s AND k.objid::bigint = %(objid)s AND k.objsubid = 1
)
"""


def lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for an election name."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def one_row(cursor: psycopg.Cursor) -> tuple:
    """The row of a statement that always returns one (a function's SELECT, INSERT ... RETURNING)."""
    row = cursor.fetchone()
    if row is None:
        raise psycopg.ProgrammingError("expected a row, got none")
    return row


class PostgresElector:
    def __init__(
        self,
        identity: str,
        *,
        dsn: str | None = None,
        name: str = "jobdash-leader",
        timeout: float = 2.0,
        lease: int = 10,
    ) -> None:
        self.identity = identity
        self.dsn = dsn or os.environ.get("DATABASE_URL", "")
        if not self.dsn.startswith(("postgres://", "postgresql://")):
            raise ValueError("postgres leader election needs a postgres:// DSN (DATABASE_URL)")
        self.name = name
        self.key = lock_key(name)
        self.timeout = timeout
        self.lease = lease
        self._conn: psycopg.Connection | None = None
        self._leadership: Leadership | None = None

    def _connect(self) -> psycopg.Connection:
        # Bound how long a dead peer goes unnoticed, on both ends. Client: keepalives
        # and tcp_user_timeout end a renew stuck on a silent network. Server: its
        # keepalives drop the backend (and the lock) of a leader host that vanished;
        # the OS default would keep it for two hours.
        probe = max(1, self.lease // 4)
        conn = psycopg.connect(
            self.dsn,
            autocommit=True,
            connect_timeout=max(1, round(self.timeout)),
            keepalives=1,
            keepalives_idle=probe,
            keepalives_interval=probe,
            keepalives_count=3,
            tcp_user_timeout=self.lease * 1000,
        )
        conn.execute(f"SET statement_timeout = {int(self.timeout * 1000)}")
        conn.execute(f"SET tcp_keepalives_idle = {probe}")
        conn.execute(f"SET tcp_keepalives_interval = {probe}")
        conn.execute("SET tcp_keepalives_count = 3")
        return conn

    def _drop(self) -> None:
        """Close the dedicated connection; the server releases its lock with it."""
        conn, self._conn, self._leadership = self._conn, None, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    # --- the Elector protocol ---

    def try_acquire(self) -> Leadership | None:
        if self._leadership is not None:
            return self._leadership  # the lock is re-entrant: taking it twice would need two unlocks
        try:
            if self._conn is None:
                self._conn = self._connect()
            if not one_row(self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)))[0]:
                return None
            self._conn.execute(SCHEMA)
            term, since = one_row(self._conn.execute(RECORD, {"name": self.name, "identity": self.identity}))
        except psycopg.Error as error:
            log.info("postgres acquire failed: %s", error)
            self._drop()
            return None
        self._leadership = Leadership(identity=self.identity, term=term, since=float(since))
        return self._leadership

    def renew(self) -> bool:
        if self._leadership is None or self._conn is None:
            return False
        try:
            # The connection alive means the lock is held: only unlock or disconnect frees it.
            self._conn.execute("SELECT 1")
            return True
        except psycopg.Error as error:
            log.warning("postgres leader connection lost: %s", error)
            self._drop()
            return False

    def resign(self) -> None:
        self._drop()

    def holder(self) -> Leadership | None:
        classid, objid = (self.key >> 32) & 0xFFFFFFFF, self.key & 0xFFFFFFFF
        params = {"name": self.name, "classid": classid, "objid": objid}
        try:
            # A short-lived connection of its own: holder() is called from other
            # threads and processes (/status), never on the lock's connection.
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=max(1, round(self.timeout))) as conn:
                row = conn.execute(HOLDER, params).fetchone()
        except psycopg.errors.UndefinedTable:
            return None  # no leader was ever elected here
        except psycopg.Error as error:
            raise BackendError(f"postgres: {error}") from error
        if row is None:
            return None
        identity, term, since = row
        return Leadership(identity=identity, term=term, since=float(since))
