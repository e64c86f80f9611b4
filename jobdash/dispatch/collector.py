"""The cyclic garbage collector, paused while a cycle runs.

A leader keeps the queue in memory between cycles (tens of thousands of rows, workloads and
predictions), and a cycle allocates a few hundred thousand small containers. With the
collector's default thresholds the allocations set off a full collection every few cycles,
each walking everything the leader keeps: measured at Kueue's baseline, a quarter of the
dispatcher's CPU. Almost nothing a cycle makes is cyclic garbage (reference counting frees
it), so the collector waits until the cycle is over: then the young generations are
collected (what the cycle made and kept), and everything at most once a minute.
"""

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

FULL_EVERY_S = 60.0


class CollectorPause:
    def __init__(self, full_every_s: float = FULL_EVERY_S):
        self.full_every_s = full_every_s
        self._full_at = time.monotonic()
        self.collections = {"young": 0, "full": 0}

    @contextmanager
    def paused(self) -> Iterator[None]:
        if not gc.isenabled():  # someone up the stack manages it
            yield
            return
        gc.disable()
        try:
            yield
        finally:
            gc.enable()
            now = time.monotonic()
            if now - self._full_at >= self.full_every_s:
                gc.collect()
                self._full_at = now
                self.collections["full"] += 1
            else:
                gc.collect(1)
                self.collections["young"] += 1
