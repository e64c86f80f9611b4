"""What the dispatcher records of itself, for the pages, the API, /readyz and /metrics to
read (cluster_selectors.py, dispatcher_health.py): the leader's term, its cycles and their
failures, and the cluster as its last cycle saw it. Only the leader writes them."""

from django.db import models
from django.db.models import Q


class Fence(models.Model):
    """The newest leader's term (one row). A release is valid only under the term
    stored here, so a deposed leader that still runs cannot release anything."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    term = models.BigIntegerField(default=0)
    holder = models.CharField(max_length=255, blank=True)
    since = models.DateTimeField(null=True, blank=True)
    # Bumped by every claim: a cycle claims only if no other claim happened since its
    # snapshot, so two cycles of one term (kicks reaching two workers) never spend the
    # same free quota twice, without a lock a paused process could hold.
    claims = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(id=1), name="fence_single_row")]

    def __str__(self) -> str:
        return f"term {self.term} held by {self.holder or 'nobody'}"


class Cycle(models.Model):
    """One admission cycle, for the status page and the operators: how long, how many."""

    started_at = models.DateTimeField(db_index=True)
    duration_ms = models.FloatField()
    term = models.BigIntegerField(null=True)
    policy = models.CharField(max_length=32)
    pending = models.PositiveIntegerField()
    admitted = models.PositiveIntegerField()
    released = models.PositiveIntegerField()
    phases = models.JSONField(default=dict)  # phase -> milliseconds

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"cycle at {self.started_at:%H:%M:%S}: {self.admitted}/{self.pending} admitted"


class ClusterState(models.Model):
    """What the last cycle saw of the cluster (one row), for pages and the API: the web
    processes have no watch cache of their own."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    updated_at = models.DateTimeField(null=True)
    # {namespace: {"hard": {...}, "used": {...}, "reserved": {...}}}, canonical integers
    quotas = models.JSONField(default=dict)
    # [{"name", "allocatable", "allocated", "labels", "unschedulable"}], canonical integers
    nodes = models.JSONField(default=list)
    # {"namespace/name": {"job": id, "replicas": {type: {phase: count}}}} of the jobs jobdash released, for the
    # job page (pods of finished jobs stay while the cluster keeps them)
    pods = models.JSONField(default=dict)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(id=1), name="cluster_state_single_row")]

    def __str__(self) -> str:
        return f"cluster as of {self.updated_at}"


class CycleFailures(models.Model):
    """The dispatcher's failed cycles (one row, written only when a cycle fails: a cycle that
    completes writes its Cycle row and nothing here). The failures since the last completed
    cycle are the current streak; `total` only grows, for the metric's counter."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    streak = models.PositiveIntegerField(default=0)  # failures in a row, as of last_at
    since = models.DateTimeField(null=True)  # the streak's first failure
    last_at = models.DateTimeField(null=True)
    term = models.BigIntegerField(null=True)  # the term the last failure ran under
    error = models.CharField(max_length=500, blank=True)  # its first line, "OperationalError: ..."
    total = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(id=1), name="cycle_failures_single_row")]

    def __str__(self) -> str:
        return f"{self.streak} failed cycles since {self.since}" if self.streak else "no failed cycle"
