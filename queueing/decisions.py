"""What one plan() call decides: the jobs to release now, with where each pod goes, and
a status for every other job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .preemption import Preemption
from .reasons import PendingStatus


@dataclass(frozen=True)
class Admission:
    """Release ``job_id`` now.  ``placement``: (role, pod index, node) for every
    pod, or None when node fit was off (the quota-only check of ``seed``);
    ``borrowing``: beyond its namespace's guaranteed share (elastic.py);
    ``counts``: role -> pods to run, for a job admitted with fewer pods than it asks
    (elastic roles between their minimum and their count, elastic_jobs.py); empty: all of
    them.  Its placement and its quota charge are those of the pods admitted."""

    job_id: int
    namespace: str
    placement: tuple[tuple[str, int, str], ...] | None
    borrowing: bool = False
    counts: Mapping[str, int] = field(default_factory=dict, hash=False)
    cluster: str = ""  # the cluster it goes to (clusters.py); "": one cluster


@dataclass(frozen=True)
class Resize:
    """Grow running elastic job ``job_id`` to ``counts`` (role -> pods, every role of the
    job); ``placement``: (role, index, node) of each pod added, indexes continuing after its
    current ones, or None when node fit was off."""

    job_id: int
    namespace: str
    counts: Mapping[str, int]
    placement: tuple[tuple[str, int, str], ...] | None


@dataclass(frozen=True)
class Plan:
    """``admissions`` in the order they were decided; ``pending`` has a status for
    every other job; ``preemptions``: running jobs to preempt, each for a waiting
    job whose status is then ``Preempting``; ``replacements`` and ``evictions``: what
    becomes of admitted gangs whose nodes failed.  ``stats`` are counters for logs and
    benchmarks."""

    admissions: tuple[Admission, ...]
    pending: Mapping[int, PendingStatus]
    policy: str = ""
    stats: Mapping[str, int] = field(default_factory=dict, compare=False)
    preemptions: tuple[Preemption, ...] = ()
    # Gangs that lost pods to failed nodes: the new whole placement of each that fits again,
    # and why each other one is to be taken back and queued again (replacement.py).
    replacements: Mapping[int, tuple[tuple[str, int, str], ...]] = field(default_factory=dict)
    evictions: Mapping[int, str] = field(default_factory=dict)
    # Pods placed on GPUs shared by memory: job id -> (role, index, cards) per such pod
    # (cards.py); apart from ``placement`` so that consumers of placements are unchanged.
    # Of a replaced gang, only the pods placed anew.
    cards: Mapping[int, tuple[tuple[str, int, tuple[int, ...]], ...]] = field(default_factory=dict)
    # Running elastic jobs that grow into room nothing waiting could use (elastic_jobs.py).
    resizes: Mapping[int, Resize] = field(default_factory=dict)

    @property
    def admitted(self) -> tuple[int, ...]:
        return tuple(admission.job_id for admission in self.admissions)
