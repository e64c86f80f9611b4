"""Polling with a deadline, for tests that wait on threads, processes or a cluster."""

import time


def wait_until(predicate, timeout: float = 5.0, interval: float = 0.02):
    """The predicate's first truthy value, or its last value once the timeout has passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def eventually(predicate, timeout: float = 5.0, message: str = "condition never held"):
    """Like wait_until, but a timeout is a test failure."""
    value = wait_until(predicate, timeout)
    if not value:
        raise AssertionError(message)
    return value
