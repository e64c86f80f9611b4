from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Job, JobEvent, Namespace
from ..presenters import demand_summary, quota_summary


class StrictCharField(serializers.CharField):
    """A manifest is text; DRF's CharField would quietly turn 5 into "5"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class JobSubmitSerializer(serializers.Serializer):
    manifest = StrictCharField(trim_whitespace=False, allow_blank=True)
    priority = serializers.IntegerField(
        required=False, default=0, help_text="Staff only: a numeric priority that wins over the class."
    )
    priority_class = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=253,
        help_text="A PriorityClass in the cluster; else the pods' priorityClassName, else the namespace's default.",
    )
    namespace = serializers.CharField(required=False, allow_blank=True, default="")


class PriorityClassSerializer(serializers.Serializer):
    priority_class = serializers.CharField(max_length=253, help_text="A PriorityClass in the cluster.")


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class JobEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["type", "message", "actor", "created_at"]


class JobSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name")
    demand = serializers.SerializerMethodField()
    submitted_by = serializers.CharField(source="submitted_by_name")

    class Meta:
        model = Job
        fields = [
            "id",
            "namespace",
            "name",
            "kind",
            "api_version",
            "state",
            "priority",
            "priority_class",
            "position",
            "reason",
            "message",
            "eta",
            "demand",
            "source",
            "submitted_by",
            "submitted_at",
            "released_at",
            "started_at",
            "finished_at",
            "attempts",
            "manifest",
        ]

    @extend_schema_field(serializers.DictField())
    def get_demand(self, job: Job) -> dict:
        return demand_summary(job.workload)


class JobDetailSerializer(JobSerializer):
    events = JobEventSerializer(many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = JobSerializer.Meta.fields + ["events"]


class NamespaceSerializer(serializers.ModelSerializer):
    queue_length = serializers.IntegerField(source="queued")
    released = serializers.IntegerField()
    running = serializers.IntegerField()
    quota = serializers.SerializerMethodField()

    class Meta:
        model = Namespace
        fields = ["name", "weight", "queue_length", "released", "running", "quota"]

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_quota(self, namespace: Namespace) -> dict | None:
        """hard, used (from the cluster) and reserved (by released jobs not yet started), as of the last cycle."""
        return quota_summary(self.context.get("cluster_quotas", {}).get(namespace.name))
