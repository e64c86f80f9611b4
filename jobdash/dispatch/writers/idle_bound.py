"""A leader paused inside a transaction must not hold the fence row's lock for long."""

from django.conf import settings
from django.db.backends.signals import connection_created


def bound_paused_transactions() -> None:
    """In a process that runs cycles: its database sessions opened from now on (a cycle's
    thread opens its own) abort a transaction idle for the leader's TTL. A leader paused
    (SIGSTOP, a frozen VM) inside one of its transactions still holds the fence row's lock,
    and its successor's take_term would wait for it until JOBDASH_DB_IDLE_IN_TRANSACTION_SECONDS;
    this way it waits no longer than the election did. (A running leader is never idle
    inside a transaction for more than milliseconds.)"""
    connection_created.connect(_bound_idle_transactions, dispatch_uid="dispatcher-idle-in-transaction")


def _bound_idle_transactions(sender, connection, **kwargs) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
            [str(int(settings.JOBDASH_LEADER_TTL_SECONDS * 1000))],
        )
