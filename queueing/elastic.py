"""Elastic quota: guaranteed shares, cohorts that lend idle capacity, and who may borrow it.

A namespace's ResourceQuota ``hard`` stays its ceiling (the API server enforces it).
An elastic namespace also has a guaranteed share G per quota key.  Its *own* usage is
what it uses plus what its in-flight jobs still have to create.  A job that keeps
own usage within G is admitted as before.  Beyond G, the job borrows: the namespace's
cohort must have that much *lendable*, where

    lendable = sum of the members' G - sum of their own usage - their claims

and a member's *claims* are the demands of its waiting jobs that fit its guarantee,
taken in its queue order.  Capacity a guaranteed job is waiting for is therefore
never lent out, so borrowers cannot take back what reclaim freed (no preemption
loops); what borrowers already hold is reclaimed by preemption (planner, phase 3e).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .reasons import Outcome, Reason
from .snapshot import PendingJob, RunningJob, Snapshot


@dataclass(slots=True, eq=False)
class _Member:
    guaranteed: dict[str, int]  # per key, at most hard
    limit: Mapping[str, int]  # borrowing limit per key (absent: up to hard)
    cohort: str
    own: dict[str, int] = field(default_factory=dict)  # per guaranteed key
    claims: dict[str, int] = field(default_factory=dict)  # of its claimed jobs not admitted yet


class ElasticQuotas:
    """The cycle's view of elastic quota: charged as jobs are admitted or preempted."""

    def __init__(self, snapshot: Snapshot):
        self.members: dict[str, _Member] = {}
        for name, quota in snapshot.quotas.items():
            if not quota.elastic:
                continue
            guaranteed = {
                key: min(amount, quota.hard[key]) if key in quota.hard else amount
                for key, amount in quota.guaranteed.items()
            }
            own = {key: quota.used.get(key, 0) for key in guaranteed}
            self.members[name] = _Member(guaranteed, quota.borrowing_limit, quota.cohort, own)
        for job in snapshot.in_flight:
            member = self.members.get(job.namespace)
            if member is not None:
                _add(member.own, job.outstanding, 1)
        self.claimed: set[int] = set()
        self.lendable: dict[str, dict[str, int]] = {}  # cohort -> key -> amount

    @property
    def active(self) -> bool:
        return bool(self.members)

    def claim(self, ordered: Iterable[PendingJob], now: float, strict: Mapping[str, bool]) -> None:
        """Phase 1b: each member's waiting jobs that fit its guarantee, in queue order; then
        what every cohort can lend.  ``strict``: namespaces whose queue stops at its head."""
        claims: dict[str, dict[str, int]] = {}
        stopped: set[str] = set()
        for job in ordered:
            member = self.members.get(job.namespace)
            if member is None or job.namespace in stopped:
                continue
            if job.backoff_until is not None and job.backoff_until > now:
                continue
            claim = claims.setdefault(job.namespace, {})
            if all(
                member.own[key] + claim.get(key, 0) + job.demand.get(key, 0) <= limit
                for key, limit in member.guaranteed.items()
            ):
                _add(claim, job.demand, 1, member.guaranteed)
                self.claimed.add(job.id)
            elif strict.get(job.namespace):
                stopped.add(job.namespace)
        for name, member in self.members.items():
            lendable = self.lendable.setdefault(member.cohort, {})
            claim = member.claims = claims.get(name, {})
            for key, amount in member.guaranteed.items():
                lendable[key] = lendable.get(key, 0) + amount - member.own[key] - claim.get(key, 0)

    def is_claimed(self, job: PendingJob) -> bool:
        return job.id in self.claimed

    def borrows(self, job: PendingJob) -> bool:
        """Whether admitting ``job`` now takes its namespace beyond its guarantee.  A job that
        did not claim comes after those that did: their share is not its to use."""
        member = self.members.get(job.namespace)
        if member is None or job.id in self.claimed:
            return False
        return any(
            member.own[key] + member.claims.get(key, 0) + job.demand.get(key, 0) > limit
            for key, limit in member.guaranteed.items()
        )

    def check(self, job: PendingJob, without: Iterable[RunningJob] = ()) -> Outcome | None:
        """None if ``job`` may be admitted as far as elastic quota goes, else why not;
        ``without``: jobs of its namespace taken as gone (preemption's what-if)."""
        member = self.members.get(job.namespace)
        if member is None or job.id in self.claimed:
            return None
        freed: dict[str, int] = {}
        for victim in without:
            _add(freed, victim.demand, 1, member.guaranteed)
        own = {key: member.own[key] + member.claims.get(key, 0) - freed.get(key, 0) for key in member.guaranteed}
        if not any(own[key] + job.demand.get(key, 0) > limit for key, limit in member.guaranteed.items()):
            return None
        lendable = self.lendable.setdefault(member.cohort, {})
        for key, guaranteed in member.guaranteed.items():
            needed = job.demand.get(key, 0)
            beyond = own[key] + needed - guaranteed
            if beyond <= 0 or needed == 0:
                continue
            detail = {
                "resource": key,
                "needed": needed,
                "free": lendable.get(key, 0),
                "guaranteed": guaranteed,
                "cohort": member.cohort,
                "limit": None,
            }
            limit = member.limit.get(key)
            if limit is not None and beyond > limit:
                detail["limit"] = limit
                return Reason.CANNOT_BORROW, detail
            if lendable.get(key, 0) + freed.get(key, 0) < needed:
                return Reason.CANNOT_BORROW, detail
        return None

    def admit(self, job: PendingJob, without: Iterable[RunningJob] = ()) -> bool:
        """Charge an admitted job; returns whether it borrows.  ``without``: jobs of its
        namespace leaving for it, whose usage it takes over (charged: only the rest)."""
        member = self.members.get(job.namespace)
        if member is None:
            return False
        borrowing = self.borrows(job)
        charge = dict(job.demand)
        for victim in without:
            _add(charge, victim.demand, -1)
        charge = {key: max(amount, 0) for key, amount in charge.items()}
        _add(member.own, charge, 1, member.guaranteed)
        if job.id in self.claimed:  # its share was never lendable: now it is used instead of claimed
            _add(member.claims, job.demand, -1, member.guaranteed)
        else:
            _add(self.lendable.setdefault(member.cohort, {}), charge, -1, member.guaranteed)
        return borrowing

    def may_take(self, victim: RunningJob, chosen: Iterable[RunningJob]) -> bool:
        """Reclaim takes only from a namespace still above its guarantee once ``chosen`` have left."""
        member = self.members.get(victim.namespace)
        if member is None:
            return False
        gone: dict[str, int] = {}
        for job in chosen:
            if job.namespace == victim.namespace:
                _add(gone, job.demand, 1, member.guaranteed)
        return any(member.own[key] - gone.get(key, 0) > limit for key, limit in member.guaranteed.items())

    def cohort_of(self, namespace: str) -> str | None:
        member = self.members.get(namespace)
        return None if member is None else member.cohort


def _add(into: dict[str, int], amounts: Mapping[str, int], sign: int, keys: Mapping[str, int] | None = None) -> None:
    for key, amount in amounts.items():
        if keys is None or key in keys:
            into[key] = into.get(key, 0) + sign * amount
