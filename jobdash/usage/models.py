"""What each team used (issue 37): GPU-, CPU- and memory-hours per day and label, folded from
the jobs' timelines (their runs: a Running event to the next end of it), and the archives of
jobs removed by retention."""

from django.db import models


class UsageDay(models.Model):
    """One day's use (UTC) by one namespace, user, kind, priority class, borrowed or not, and
    cluster (issue 49: the one it ran in; "" with one cluster)."""

    day = models.DateField()
    namespace = models.CharField(max_length=63)
    user = models.CharField(max_length=255, blank=True)
    kind = models.CharField(max_length=63, blank=True)
    priority_class = models.CharField(max_length=253, blank=True)
    borrowed = models.BooleanField(default=False)
    cluster = models.CharField(max_length=63, blank=True, default="")
    gpu_s = models.FloatField(default=0.0)
    cpu_s = models.FloatField(default=0.0)  # core-seconds
    memory_gib_s = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "namespace", "user", "kind", "priority_class", "borrowed", "cluster"],
                name="usage_day_once",
            )
        ]
        indexes = [models.Index(fields=["day", "namespace"], name="usage_day_namespace")]

    def __str__(self) -> str:
        return f"{self.day} {self.namespace}/{self.user}: {self.gpu_s / 3600:.1f} GPU-h"


class UsageMark(models.Model):
    """How far the timelines are folded (one row): every event up to `event_id`; the runs open
    there, {job id: [start (epoch seconds), scale (an elastic job's pods per role, or null)]}
    (a bare start: a mark written before). A fold locks this row: two never fold at once."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    event_id = models.BigIntegerField(default=0)
    open = models.JSONField(default=dict)
    folded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="usage_mark_single_row")]

    def __str__(self) -> str:
        return f"folded up to event {self.event_id}"


class Archive(models.Model):
    """Finished jobs and their events removed by retention, kept as a compressed JSON file."""

    month = models.DateField()  # the first day of the month the jobs finished in
    path = models.CharField(max_length=500)
    jobs = models.PositiveIntegerField(default=0)
    events = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-month", "-id"]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m}: {self.jobs} jobs in {self.path}"
