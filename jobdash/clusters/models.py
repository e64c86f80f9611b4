"""What jobdash knows of each cluster it dispatches to (config.py names them): whether its
API server answers, and the copies of jobs it must delete there when it comes back."""

from django.db import models


class ClusterHealth(models.TextChoices):
    ANSWERING = "Answering"
    LOST = "Lost"  # silent longer than JOBDASH_CLUSTER_LOST_AFTER_SECONDS: nothing new goes there
    RETURNING = "Returning"  # answers again: the copies left there are deleted before anything is sent


class Cluster(models.Model):
    """One configured cluster; written by the dispatcher (phase clusters), read by every page."""

    name = models.CharField(max_length=63, unique=True)
    labels = models.JSONField(default=dict, blank=True)  # from the configuration: jobs select by them
    health = models.CharField(max_length=16, choices=ClusterHealth.choices, default=ClusterHealth.ANSWERING)
    answered_at = models.DateTimeField(null=True, blank=True)  # its API server's last answer
    lost_at = models.DateTimeField(null=True, blank=True)  # when it was marked lost (None: never, or back)
    # Admins may take a cluster out of dispatch by hand (as if lost, without replanning).
    cordoned = models.BooleanField(default=False, help_text="Send nothing new to this cluster.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def takes_jobs(self) -> bool:
        return self.health == ClusterHealth.ANSWERING and not self.cordoned


class LeftCopy(models.Model):
    """A job's object left in a lost cluster when the job was planned again elsewhere: deleted
    there when the cluster answers again, before anything else is sent to it. The job a plain
    number, as LostWork's: the record outlives the job (retention removes jobs, not this)."""

    job_id = models.BigIntegerField(db_index=True)
    cluster = models.CharField(max_length=63)
    kind_key = models.CharField(max_length=128)
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    left_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "left copies"
        indexes = [models.Index(fields=["cluster", "deleted_at"])]

    def __str__(self) -> str:
        return f"{self.kind_key} {self.namespace}/{self.name} in {self.cluster}"
