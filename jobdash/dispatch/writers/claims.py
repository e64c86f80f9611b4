"""An admission as its claim writes it on the job's row (transitions.claim: Queued -> Released)."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from jobdash.dispatch.phases.active import Placement, cards_column, placement_column
from queueing import Admission
from queueing.cards import CardPlacement


@dataclass(frozen=True, slots=True)
class Claim:
    """One admission as its claim writes it on the job's row (Queued -> Released): the
    planner's decision, typed as the planner made it; claim() turns it into columns."""

    job_id: int
    placement: Placement | None = None  # (role, index, node) of each pod; None with node fit off
    borrowing: bool = False  # beyond its namespace's guaranteed share
    cards: CardPlacement = ()  # (role, index, cards) of its pods on GPUs shared by memory
    counts: Mapping[str, int] = field(default_factory=dict, hash=False)  # role -> pods admitted; {}: all
    cluster: str = ""  # the cluster it goes to; "": the one cluster

    @classmethod
    def of(cls, admission: Admission, cards: CardPlacement = ()) -> "Claim":
        """`cards`: the plan's for this job (Plan.cards, kept apart from its placement)."""
        return cls(
            admission.job_id, admission.placement, admission.borrowing, cards, admission.counts, admission.cluster
        )

    def columns(self) -> tuple[list | None, bool, list | None, dict[str, int] | None, str]:
        """Job.placement, borrowing, cards, scale and cluster, as stored."""
        placement, cards = placement_column(self.placement), cards_column(self.cards)
        return placement, self.borrowing, cards, dict(self.counts) or None, self.cluster
