"""What the leader may write to the cluster that no job waits for (QueuedJob objects and
Kubernetes Events): a token bucket, as client-go's QPS and burst limit a controller's
requests (Kueue's manager runs with qps 50, burst 100). Admission's own writes (creates,
unsuspends, pod patches) are not counted: the queue in the cluster may lag behind a burst
of submissions, never the other way round."""

from dataclasses import dataclass, field
from datetime import datetime

# ... and the share of the leader's time they may take: reading and comparing a queue of
# thousands each cycle would slow admission down as much as the writes.
PUBLISH_SHARE = 0.1


@dataclass
class WriteBudget:
    per_second: float
    burst: int
    tokens: float = field(init=False)
    _at: datetime | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)

    def refill(self, now: datetime) -> int:
        """The whole writes available at `now` (the dispatcher's clock)."""
        if self._at is not None and now > self._at:
            elapsed = (now - self._at).total_seconds()
            self.tokens = min(float(self.burst), self.tokens + elapsed * self.per_second)
        self._at = now if self._at is None or now > self._at else self._at
        return int(self.tokens)

    def spend(self, writes: int) -> None:
        self.tokens = max(0.0, self.tokens - writes)
