"""Embedded mode: a single process, nothing to elect; it always leads with term 1."""

import time

from jobdash.leader.base import Leadership


class NoneElector:
    def __init__(self, identity: str) -> None:
        self.identity = identity
        self._leadership = Leadership(identity=identity, term=1, since=time.time())

    def try_acquire(self) -> Leadership:
        return self._leadership

    def valid_until(self) -> float:
        return float("inf")

    def renew(self) -> bool:
        return True

    def resign(self) -> None:
        pass

    def holder(self) -> Leadership:
        return self._leadership
