from datetime import UTC, datetime

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from queueing.job_options import JobOptions

from .. import elastic, estimates
from ..dispatcher_health import waiting_reason
from ..models import Job, JobEvent, LostWork, Namespace, State
from ..presenters import demand_summary, elastic_sizes, quota_summary
from ..selectors import lost_work_of
from .status import DispatcherHealthSerializer


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
    # Workflow options (issue 36), checked by queueing.job_options.with_fields (400s name the field).
    after = serializers.JSONField(
        required=False, help_text='Dependencies, as the annotation jobdash.io/after: "ok:train-1,any:42" or a list.'
    )
    keep_if_never_satisfied = serializers.JSONField(
        required=False, help_text="Stay queued (DependencyNeverSatisfied) rather than be cancelled."
    )
    retry = serializers.JSONField(
        required=False,
        help_text='{"limit": 3, "on": ["NodeLost", "Evicted", "Preempted"], "exit_codes": [42], "backoff_seconds": 30}',
    )
    max_run_seconds = serializers.JSONField(required=False, help_text="Stopped (DeadlineExceeded) once run this long.")
    start_by = serializers.JSONField(required=False, help_text="RFC 3339: cancelled if still queued then.")
    # Checkpoints (issue 48), over the annotations jobdash.io/checkpoint-every, -on-notice, min-runtime.
    checkpoint_every = serializers.JSONField(
        required=False, help_text='It writes a checkpoint this often: a duration ("10m", "1h", "90s") or seconds.'
    )
    checkpoint_on_notice = serializers.JSONField(
        required=False,
        help_text="How long it needs, once told it is preempted, to write a checkpoint: a duration or seconds "
        "(at most JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS).",
    )
    min_runtime = serializers.JSONField(
        required=False,
        help_text="Not preempted before it has run this long: a duration or seconds (at most "
        "JOBDASH_MAX_MIN_RUNTIME_SECONDS; default: its namespace's).",
    )
    array = serializers.CharField(
        required=False, max_length=255, help_text='One job per index: "0-99", "1,3,5-7", "0-15:4", "0-99%5".'
    )


OPTION_FIELDS = (
    "after",
    "keep_if_never_satisfied",
    "retry",
    "max_run_seconds",
    "start_by",
    "checkpoint_every",
    "checkpoint_on_notice",
    "min_runtime",
)


class CheckpointSerializer(serializers.Serializer):
    at = serializers.DateTimeField(
        required=False, help_text="When the checkpoint was written (ISO 8601); default: now."
    )


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
    cluster = serializers.CharField(
        read_only=True,
        help_text="The cluster it was released to (several clusters); blank: the one cluster, or none yet.",
    )
    borrowing = serializers.BooleanField(
        read_only=True, help_text="Admitted beyond its namespace's guaranteed share, on capacity its cohort lends."
    )
    preemptions = serializers.IntegerField(read_only=True, help_text="How often it was preempted.")
    preempted_for = serializers.IntegerField(
        source="preempted_for_id",
        read_only=True,
        allow_null=True,
        help_text="While it is being preempted (its grace period): the job it makes room for.",
    )
    preempt_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When its grace period ends and it is suspended."
    )
    preempted_by = serializers.IntegerField(
        source="preempted_by_id", read_only=True, allow_null=True, help_text="The job it last made room for."
    )
    # Start-time estimates (issue #16), written by the dispatcher; read-only.
    eta = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="The likely start of a queued job: as many jobs start after it as before. Null when unknown "
        "(the message says why).",
    )
    eta_late = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="The late bound of a queued job's start: 90 % of jobs start by then. Null when unknown.",
    )
    eta_first_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the job was first given an estimated start."
    )
    eta_first = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="The first likely start it was given (kept after it starts: what its start is measured against).",
    )
    eta_first_late = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="The first late bound (90 %) it was given."
    )
    predicted_duration_s = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="The likely run time in seconds, predicted when the dispatcher first saw the job.",
    )
    predicted_p90_s = serializers.FloatField(
        read_only=True, allow_null=True, help_text="The run time in seconds 90 % of such jobs finish within."
    )
    predicted_tail_s = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="The run time in seconds 99 % of such jobs finish within: a job is placed on lent nodes "
        "only if it ends by their reclaim by this bound (or checkpoints).",
    )
    prediction_source = serializers.CharField(
        read_only=True,
        help_text='Which history the prediction came from: "user+name", "name", "user", "namespace+shape", '
        '"namespace", "shape", "cluster", "stated+user", "stated+namespace", "stated", or "none" (no prediction); '
        '"" before the dispatcher has seen the job.',
    )
    past_late_bound = serializers.SerializerMethodField(
        help_text="Queued and still waiting after the first late bound it was given; the message says why."
    )
    elastic = serializers.SerializerMethodField(
        help_text="Per elastic role (e.g. an elastic PyTorchJob's Worker): minimum, maximum and current (the pods it "
        "runs once released; null before). Empty for a job with no elastic role."
    )
    workflow = serializers.IntegerField(source="workflow_id", read_only=True, allow_null=True)
    array_index = serializers.IntegerField(read_only=True, allow_null=True)
    dependencies = serializers.SerializerMethodField(
        help_text='[{"job": 42, "name": "train-1", "condition": "ok", "state": "Succeeded"}]: what it waits for.'
    )
    retries = serializers.IntegerField(read_only=True, help_text="Retries made after failures its policy retries.")
    retry_limit = serializers.SerializerMethodField()
    failure = serializers.SerializerMethodField(
        help_text='Its last failure as classified: {"class": "NodeLost", "message": ..., "exit_code": null}.'
    )
    max_run_seconds = serializers.SerializerMethodField()
    start_by = serializers.SerializerMethodField()
    checkpoint_every_s = serializers.FloatField(
        read_only=True, allow_null=True, help_text="It writes a checkpoint this often (seconds); null: not said."
    )
    checkpoint_on_notice_s = serializers.FloatField(
        read_only=True, allow_null=True, help_text="Seconds it needs after a notice to write a checkpoint."
    )
    min_runtime_s = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="Seconds it runs before it may be preempted: its own, else its namespace's default, within the "
        "admin's ceiling.",
    )
    last_checkpoint_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="The last checkpoint it reported (never moves back)."
    )
    checkpoints = serializers.IntegerField(read_only=True, help_text="How many checkpoints it reported while running.")

    class Meta:
        model = Job
        fields = [
            "id",
            "namespace",
            "name",
            "kind",
            "api_version",
            "state",
            "cluster",
            "priority",
            "priority_class",
            "position",
            "reason",
            "message",
            "eta",
            "eta_late",
            "eta_first_at",
            "eta_first",
            "eta_first_late",
            "past_late_bound",
            "elastic",
            "predicted_duration_s",
            "predicted_p90_s",
            "predicted_tail_s",
            "prediction_source",
            "demand",
            "source",
            "submitted_by",
            "submitted_at",
            "released_at",
            "started_at",
            "finished_at",
            "attempts",
            "borrowing",
            "preemptions",
            "preempted_for",
            "preempt_at",
            "preempted_by",
            "workflow",
            "array_index",
            "dependencies",
            "retries",
            "retry_limit",
            "failure",
            "max_run_seconds",
            "start_by",
            "checkpoint_every_s",
            "checkpoint_on_notice_s",
            "min_runtime_s",
            "last_checkpoint_at",
            "checkpoints",
            "manifest",
        ]

    def to_representation(self, instance: Job) -> dict:
        """A Queued job's reason and message say so while the dispatcher is not completing
        cycles (the views put its health in the context as "dispatcher")."""
        data = super().to_representation(instance)
        health = self.context.get("dispatcher")
        if health is not None and instance.state == State.QUEUED:
            data["reason"], data["message"] = waiting_reason(instance.reason, instance.message, health)
        return data

    @extend_schema_field(serializers.DictField())
    def get_demand(self, job: Job) -> dict:
        return demand_summary(job.workload)

    @extend_schema_field(serializers.DictField(child=serializers.DictField(allow_null=True)))
    def get_elastic(self, job: Job) -> dict:
        return elastic_sizes(job.workload, job.scale, job.released_at is not None)

    def get_past_late_bound(self, job: Job) -> bool:
        return estimates.past_late_bound(job, self.context.get("now") or timezone.now())

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_dependencies(self, job: Job) -> list[dict]:
        return [
            {"job": d.on_id, "name": d.on.name, "condition": d.condition, "state": d.on.state}
            for d in job.dependencies.all()
        ]

    def get_retry_limit(self, job: Job) -> int:
        return _options(job).retry.limit

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_failure(self, job: Job) -> dict | None:
        f = job.failure
        return None if not f else {"class": f.get("cls"), "message": f.get("message"), "exit_code": f.get("exit_code")}

    def get_max_run_seconds(self, job: Job) -> float | None:
        return _options(job).max_run_s

    def get_start_by(self, job: Job) -> str | None:
        at = _options(job).start_by
        return None if at is None else datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def _options(job: Job) -> JobOptions:
    """The job's options, parsed once per job however many fields read them."""
    parsed = getattr(job, "_parsed_options", None)
    if parsed is None:
        parsed = job._parsed_options = JobOptions.from_json(job.options)  # type: ignore[attr-defined]
    return parsed


class LostWorkSerializer(serializers.Serializer):
    cause = serializers.ChoiceField(choices=LostWork.Cause.choices)
    at = serializers.DateTimeField(help_text="When it was stopped.")
    seconds = serializers.FloatField(help_text="Seconds of its run redone: since its last checkpoint.")
    gpu_hours = serializers.FloatField(help_text="Those seconds times the GPUs it held, in hours.")
    checkpointed_at = serializers.DateTimeField(
        allow_null=True, help_text="The checkpoint it resumes from (null: none, the whole run is redone)."
    )


class JobDetailSerializer(JobSerializer):
    events = JobEventSerializer(many=True, read_only=True)
    dispatcher = serializers.SerializerMethodField(
        help_text="Whether the dispatcher is releasing jobs, as GET /api/v1/status/ says it."
    )
    lost_work = serializers.SerializerMethodField(
        help_text="Each time it was stopped to make room (preempted, its lent nodes reclaimed, moved): the work redone."
    )

    class Meta(JobSerializer.Meta):
        fields = JobSerializer.Meta.fields + ["events", "dispatcher", "lost_work"]

    @extend_schema_field(LostWorkSerializer(many=True))
    def get_lost_work(self, job: Job) -> list[dict]:
        return list(LostWorkSerializer(lost_work_of(job.pk), many=True).data)

    @extend_schema_field(DispatcherHealthSerializer(allow_null=True))
    def get_dispatcher(self, job: Job) -> dict | None:
        health = self.context.get("dispatcher")
        return None if health is None else health.as_json()


def _quantities(help_text: str) -> serializers.DictField:
    return serializers.DictField(child=serializers.CharField(), help_text=help_text)


class QuotaSerializer(serializers.Serializer):
    """Per ResourceQuota key, as Kubernetes quantities, as of the last admission cycle."""

    hard = _quantities("The ResourceQuota's hard limits.")
    used = _quantities("Used, as the ResourceQuota's status reports it.")
    reserved = _quantities("Demand of released jobs whose pods are not all created yet.")
    free = _quantities("hard - used - reserved (at least 0), as the planner counts it.")
    guaranteed = _quantities("The guaranteed share (elastic quota); empty when the namespace is not elastic.")
    borrowed = _quantities("Per guaranteed key: what it holds (used + reserved) beyond its guarantee.")
    guaranteed_free = _quantities("Per guaranteed key: what of the guarantee it does not hold.")


class ElasticQuotaSerializer(serializers.Serializer):
    """PATCH /api/v1/namespaces/<name>/ (staff): the fields given are set, the others stay."""

    guaranteed = serializers.DictField(
        child=serializers.CharField(max_length=128),
        required=False,
        help_text='Guaranteed share per ResourceQuota compute key, e.g. {"requests.nvidia.com/gpu": "16"}; '
        "{} makes the namespace not elastic. At most the ResourceQuota hard; a cohort's guarantees together "
        "at most the cluster's schedulable capacity.",
    )
    cohort = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=63,
        help_text="Namespaces of one cohort lend each other idle guaranteed capacity; blank: the cluster-wide cohort.",
    )
    borrowing_limit = serializers.DictField(
        child=serializers.CharField(max_length=128),
        required=False,
        help_text="Most it may borrow beyond its guarantee, per guaranteed key; {}: up to the ResourceQuota hard.",
    )

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            known = ", ".join(self.fields)
            raise serializers.ValidationError({name: [f"unknown field; known: {known}"] for name in unknown})
        return attrs


class EstimateRecordSerializer(serializers.Serializer):
    """The namespace's track record of start estimates."""

    jobs = serializers.IntegerField(
        help_text=f"Its last started jobs that had been given an estimated start (at most {estimates.RECORD_JOBS})."
    )
    within_20_min = serializers.IntegerField(
        help_text="Of those, how many started within 20 minutes (either side) of the likely start first given."
    )
    by_late_bound = serializers.IntegerField(help_text="Of those, how many started by the late bound first given.")


class NamespaceSerializer(serializers.ModelSerializer):
    queue_length = serializers.IntegerField(source="queued")
    released = serializers.IntegerField()
    running = serializers.IntegerField()
    guaranteed = _quantities("Guaranteed share per quota key (elastic quota); empty: not elastic.")
    cohort = serializers.CharField(help_text="Blank: the cluster-wide cohort.")
    borrowing_limit = _quantities("Most it may borrow beyond its guarantee, per key; empty: up to the quota's hard.")
    quota = serializers.SerializerMethodField()
    estimate_record = serializers.SerializerMethodField()

    class Meta:
        model = Namespace
        fields = [
            "name",
            "weight",
            "queue_length",
            "released",
            "running",
            "guaranteed",
            "cohort",
            "borrowing_limit",
            "quota",
            "estimate_record",
        ]

    @extend_schema_field(QuotaSerializer(allow_null=True))
    def get_quota(self, namespace: Namespace) -> dict | None:
        """hard, used (from the cluster) and reserved (by released jobs not yet started), as of
        the last cycle, with free, and for an elastic namespace guaranteed, borrowed and guaranteed_free."""
        quota = self.context.get("cluster_quotas", {}).get(namespace.name)
        return quota_summary(quota, elastic.amounts(namespace.guaranteed))

    @extend_schema_field(EstimateRecordSerializer)
    def get_estimate_record(self, namespace: Namespace) -> dict[str, int]:
        """Of its last 10 started jobs that had an estimated start: how many started within 20
        minutes of the likely start first given, and how many by the late bound first given."""
        records = self.context.get("estimate_records")
        record = records[namespace.pk] if records and namespace.pk in records else estimates.estimate_record(namespace)
        return record.as_dict()
