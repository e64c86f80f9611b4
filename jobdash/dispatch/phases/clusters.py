"""The leader's clusters (issue 49), looked at first in every cycle (phase 0): which answer,
which are lost, and what becomes of the jobs in a lost one.

A cluster is Answering while its API server answered within JOBDASH_CLUSTER_LOST_AFTER_SECONDS
(the gateway asks every few seconds, multi.py). Silent longer, it is Lost: the plan sends
nothing new there, and its jobs are frozen as they were (neither tracked nor reconciled: a
silent cluster's cache says nothing true). Lost for JOBDASH_CLUSTER_REPLAN_RELEASED_SECONDS,
its released jobs that never ran are queued again, to go elsewhere; for
JOBDASH_CLUSTER_REPLAN_RUNNING_SECONDS, so are its running jobs that checkpoint or say they
may be restarted (``jobdash.io/restartable: "true"``), the work since their checkpoint
counted lost. Each such job leaves a LeftCopy: its object there. When the cluster answers
again it is Returning: every left copy is deleted there first, and only then is it
Answering, and takes jobs again. So a job runs in two clusters only while one of them is
silent: at no moment while both answer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from jobdash.cluster import gateway as gw
from jobdash.cluster.multi import MultiGateway
from jobdash.clusters.models import Cluster, ClusterHealth, LeftCopy
from jobdash.dispatch.writers import replanned, transitions
from jobdash.jobs.models import Job, JobEvent, LostWork, State
from jobdash.usage import lost_work
from queueing import clusters as planned
from queueing.namespace_quota import NamespaceQuota

log = logging.getLogger(__name__)

RESTARTABLE_ANNOTATION = "jobdash.io/restartable"
ANSWERED_EVERY_S = 10.0  # Cluster.answered_at is written at most this often (it is for people)


@dataclass(frozen=True)
class ClusterRules:
    lost_after_s: float
    replan_released_s: float
    replan_running_s: float

    @classmethod
    def from_django(cls) -> ClusterRules:
        return cls(
            settings.JOBDASH_CLUSTER_LOST_AFTER_SECONDS,
            settings.JOBDASH_CLUSTER_REPLAN_RELEASED_SECONDS,
            settings.JOBDASH_CLUSTER_REPLAN_RUNNING_SECONDS,
        )


class ClusterWatch:
    """The leader's view of its clusters; None for a leader of one cluster (`of`)."""

    def __init__(self, gateway: MultiGateway, rules: ClusterRules | None = None):
        self.gateway = gateway
        self.rules = rules or ClusterRules.from_django()
        self.frozen: frozenset[str] = frozenset()  # Lost or Returning: nothing sent, nothing tracked
        self.closed: frozenset[str] = frozenset()  # frozen, or cordoned by an admin: nothing new goes there
        self._rows: dict[str, Cluster] = {}

    @classmethod
    def of(cls, gateway: gw.ClusterGateway) -> ClusterWatch | None:
        return cls(gateway) if isinstance(gateway, MultiGateway) else None

    def check(self, term: int, now: datetime) -> dict[str, int]:
        """Each cluster's health brought up to date, and the lost rules applied."""
        done: dict[str, int] = {}
        self._read_rows()
        for name, row in self._rows.items():
            answered = self.gateway.answered_at(name)
            silent = answered is None or now.timestamp() - answered > self.rules.lost_after_s
            before = row.health
            if row.health == ClusterHealth.ANSWERING and silent:
                row.health, row.lost_at = ClusterHealth.LOST, now
                log.warning("cluster %s lost: its API server has not answered for %.0fs", name, self.rules.lost_after_s)
            elif row.health == ClusterHealth.LOST and not silent:
                row.health = ClusterHealth.RETURNING
                log.warning("cluster %s answers again: deleting the copies left there first", name)
            if row.health == ClusterHealth.RETURNING and not silent:
                deleted, left = self._delete_left_copies(name, term, now)
                done["copies_deleted"] = done.get("copies_deleted", 0) + deleted
                if not left:
                    row.health, row.lost_at = ClusterHealth.ANSWERING, None
                    log.warning("cluster %s is back: it takes jobs again", name)
            fresh = answered is not None and (
                row.answered_at is None or answered - row.answered_at.timestamp() >= ANSWERED_EVERY_S
            )
            if fresh and answered is not None:
                row.answered_at = datetime.fromtimestamp(answered, UTC)
            if row.health != before or fresh:
                Cluster.objects.filter(pk=row.pk).update(
                    health=row.health, lost_at=row.lost_at, answered_at=row.answered_at
                )
        frozen = frozenset(name for name, row in self._rows.items() if row.health != ClusterHealth.ANSWERING)
        closed = frozen | {name for name, row in self._rows.items() if row.cordoned}
        if (frozen, closed) != (self.frozen, self.closed):
            self.frozen, self.closed = frozen, closed
            self.gateway.frozen = frozen
            self.gateway.health_changed()  # (the next look is not quiet: the plan changes)
        for name in frozen:
            row = self._rows[name]
            if row.health == ClusterHealth.LOST and row.lost_at is not None:
                lost_for = (now - row.lost_at).total_seconds()
                for outcome, count in self._replan(name, lost_for, term, now).items():
                    done[outcome] = done.get(outcome, 0) + count
        return done

    def _read_rows(self) -> None:
        """The Cluster rows, made for clusters new to the configuration; an admin's cordon read anew."""
        if not self._rows:
            with transaction.atomic():  # (all at once: a submission checks its cluster's name against them)
                forget_unconfigured(self.gateway.names)
                for name in self.gateway.names:
                    labels = self.gateway.labels[name]
                    row, _ = Cluster.objects.get_or_create(name=name, defaults={"labels": labels})
                    if row.labels != labels:
                        Cluster.objects.filter(pk=row.pk).update(labels=labels)
                    self._rows[name] = row
        cordoned = dict(Cluster.objects.filter(name__in=self._rows).values_list("name", "cordoned"))
        for name, row in self._rows.items():
            row.cordoned = cordoned.get(name, False)

    def _delete_left_copies(self, name: str, term: int, now: datetime) -> tuple[int, int]:
        """Delete there every copy left when its jobs were planned elsewhere; (deleted, left)."""
        copies = list(LeftCopy.objects.filter(cluster=name, deleted_at__isnull=True))
        target = self.gateway.gateway(name)
        deleted = 0
        for copy in copies:
            try:
                target.delete_job_object((copy.kind_key, copy.namespace, copy.name), term)
            except gw.NotFound:
                pass
            except gw.GatewayError as error:
                log.warning("cluster %s: could not delete %s yet (%s)", name, copy, error)
                continue
            with transaction.atomic():
                LeftCopy.objects.filter(pk=copy.pk).update(deleted_at=now)
                JobEvent.objects.create(
                    job_id=copy.job_id,
                    type="CopyDeleted",
                    message=f"its copy left in cluster {name} when that cluster was lost, deleted there",
                    actor=transitions.DISPATCHER,
                )
            deleted += 1
        return deleted, len(copies) - deleted

    def _replan(self, name: str, lost_for: float, term: int, now: datetime) -> dict[str, int]:
        """The lost cluster's jobs queued again, each by its rule."""
        done = {"replanned_released": 0, "replanned_running": 0}
        if lost_for >= self.rules.replan_released_s:
            never_ran = Job.objects.filter(cluster=name, state=State.RELEASED, started_at__isnull=True)
            for row in never_ran.values("id", "kind_key", "namespace__name", "name"):
                note = f"cluster {name} lost {lost_for:.0f}s ago before it ran: planned again"
                if replanned.cluster_lost(
                    row["id"], from_state=State.RELEASED, note=note, left=_left(row, name, now), term=term, now=now
                ):
                    done["replanned_released"] += 1
        if lost_for >= self.rules.replan_running_s:
            running = Job.objects.filter(cluster=name, state=State.RUNNING).filter(_may_restart())
            for row in running.values(*lost_work.JOB_FIELDS, "kind_key", "name", "parsed"):
                if not _restartable(row):
                    continue
                note = f"cluster {name} lost {lost_for:.0f}s ago; it may be restarted: started again elsewhere"
                lost = lost_work.stopped(row, LostWork.Cause.CLUSTER, now)
                left = _left(row, name, now)
                if replanned.cluster_lost(
                    row["id"], from_state=State.RUNNING, note=note, left=left, lost=lost, term=term, now=now
                ):
                    done["replanned_running"] += 1
        return {key: count for key, count in done.items() if count}

    def plan_clusters(self, quotas: Mapping[str, Mapping[str, NamespaceQuota]]) -> tuple[planned.Cluster, ...]:
        """The clusters as the plan sees them (`quotas`: per cluster, each namespace's there)."""
        return tuple(
            planned.Cluster(
                name,
                self.gateway.labels[name],
                quotas.get(name, {}),
                lost=name in self.frozen,
                cordoned=self._rows[name].cordoned if name in self._rows else False,
            )
            for name in self.gateway.names
        )


def _left(row: Mapping, cluster: str, now: datetime) -> LeftCopy:
    return LeftCopy(
        job_id=row["id"],
        cluster=cluster,
        kind_key=row["kind_key"],
        namespace=row["namespace__name"],
        name=row["name"],
        left_at=now,
    )


def _may_restart() -> Q:
    """Jobs that checkpoint, or may say they may be restarted (read per row: _restartable)."""
    return (
        Q(checkpoint_every_s__isnull=False)
        | Q(checkpoint_on_notice_s__isnull=False)
        | Q(last_checkpoint_at__isnull=False)
        | Q(parsed__metadata__annotations__has_key=RESTARTABLE_ANNOTATION)
    )


def _restartable(row: Mapping) -> bool:
    if row["checkpoint_every_s"] is not None or row["checkpoint_on_notice_s"] is not None:
        return True
    if row["last_checkpoint_at"] is not None:
        return True
    annotations = ((row.get("parsed") or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(RESTARTABLE_ANNOTATION, "")).lower() == "true"


def forget_unconfigured(names: tuple[str, ...] = ()) -> int:
    """Clusters recorded before and no longer configured (make run with two, then with one)
    are forgotten: pages, metrics and submissions know the configured ones only."""
    return Cluster.objects.exclude(name__in=names).delete()[0]
