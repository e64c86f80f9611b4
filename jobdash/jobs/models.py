from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from queueing import POLICY_NAMES

# The dispatcher's records of itself (records.py), reachable from here as every model of the app.
from .records import ClusterState as ClusterState
from .records import Cycle as Cycle
from .records import CycleFailures as CycleFailures
from .records import Fence as Fence


def validate_policy_name(value: str) -> None:
    """A validator, not `choices`: the policy list grows without a migration each time."""
    if value and value not in POLICY_NAMES:
        raise ValidationError(f"unknown policy {value!r}; expected one of {', '.join(POLICY_NAMES)}")


class State(models.TextChoices):
    QUEUED = "Queued"
    RELEASED = "Released"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


ACTIVE_STATES = (State.QUEUED, State.RELEASED, State.RUNNING)
FINISHED_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED)


class Source(models.TextChoices):
    WEB = "web", "Web form"
    API = "api", "REST API"
    WEBHOOK = "webhook", "Admission webhook"
    ADMIN = "admin", "Admin console"


class Namespace(models.Model):
    """A Kubernetes namespace whose training jobs jobdash admits. Members may submit and see its jobs."""

    name = models.CharField(max_length=63, unique=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="jobdash_namespaces")
    groups = models.ManyToManyField(Group, blank=True, related_name="jobdash_namespaces")
    weight = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1)], help_text="Share of the cluster under fair share."
    )
    # Orders this namespace's own queue (and its head-of-line rules); which namespace
    # admits next across the cluster stays the global policy's (queueing.planner).
    policy = models.CharField(
        max_length=32,
        blank=True,
        validators=[validate_policy_name],
        help_text="Blank: the global JOBDASH_POLICY. Otherwise the policy that orders this namespace's queue.",
    )
    # Kubernetes PriorityClass names (scheduling.k8s.io/v1), read from the cluster when used.
    default_priority_class = models.CharField(
        max_length=253,
        blank=True,
        help_text="Blank: none (priority 0). The PriorityClass of a job that names none.",
    )
    max_priority_class = models.CharField(
        max_length=253,
        blank=True,
        help_text="Blank: no limit. Members may not ask for a PriorityClass whose value is above this class's.",
    )
    # Elastic quota (queueing/elastic.py): {quota key: quantity} as the admin wrote them.
    # Empty: not elastic, the ResourceQuota hard is all the namespace gets.
    guaranteed = models.JSONField(
        default=dict,
        blank=True,
        help_text='Guaranteed share per quota key, e.g. {"requests.nvidia.com/gpu": "16"}. '
        "Empty: the ResourceQuota hard, no lending or borrowing.",
    )
    cohort = models.CharField(
        max_length=63,
        blank=True,
        help_text="Namespaces of one cohort lend each other idle guaranteed capacity. Blank: the cluster-wide cohort.",
    )
    borrowing_limit = models.JSONField(
        default=dict,
        blank=True,
        help_text="Most it may borrow beyond its guarantee, per quota key. Empty: up to the ResourceQuota hard.",
    )
    # Plain Pods (no controller) are queued when they ask for a device (an extended resource);
    # with this, every one of them is.
    # Issue 37: GPU-hours a month (UTC); past them its jobs only borrow (first to be preempted) or wait.
    gpu_hour_budget = models.PositiveIntegerField(null=True, blank=True, help_text="Blank: no budget.")
    over_budget = models.CharField(
        max_length=8, choices=[("borrow", "borrow only"), ("wait", "wait")], default="borrow", blank=True
    )
    # Issue 36: a job that names no maximum run time (jobdash.io/max-run-time) gets this one.
    default_max_run_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Blank: none. Jobs that state no maximum run time are stopped after this many seconds.",
    )
    # Issue 48: a job that states no minimum run time (jobdash.io/min-runtime) gets this one,
    # cut to JOBDASH_MAX_MIN_RUNTIME_SECONDS.
    default_min_runtime_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Blank: none. Jobs that state no minimum run time are not preempted before they have run this "
        "many seconds (at most JOBDASH_MAX_MIN_RUNTIME_SECONDS).",
    )
    queue_all_pods = models.BooleanField(
        default=False,
        help_text="Queue every plain Pod (one no controller owns) created here, not only those asking for "
        "GPUs or other devices.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Workflow(models.Model):
    """Jobs submitted together (issue 36): a graph of dependencies declared in one YAML, or an
    array of one manifest's indexed copies. Its jobs are queued each on its own; the workflow
    only groups them (one page, one cancel) and, for an array, limits how many run at once."""

    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="workflows")
    name = models.CharField(max_length=63)
    kind = models.CharField(max_length=8, choices=[("dag", "dag"), ("array", "array")], default="dag")
    # Slurm's %N: at most this many of its jobs admitted (Released or Running) at once.
    concurrency = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    array = models.CharField(max_length=255, blank=True)  # the array's spec as written, e.g. "0-19%5"
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    submitted_by_name = models.CharField("submitted by", max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["namespace", "-created_at"], name="workflow_ns_created")]

    def __str__(self) -> str:
        return f"{self.namespace.name}/{self.name} (workflow #{self.pk})"


class Job(models.Model):
    # Indexed by the (namespace, ...) indexes below: a namespace's jobs are found through them.
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="jobs", db_index=False)
    name = models.CharField(max_length=63)
    kind = models.CharField(max_length=63)
    api_version = models.CharField(max_length=127)
    # The kind's registry key ("<plural>.<group>", queueing.workload.resource_key), fixed at
    # submission: how the cluster side names the kind (its resource, its count/<key> quota,
    # a job's object key), never rebuilt from kind and apiVersion.
    kind_key = models.CharField(max_length=127)
    # Exactly as submitted, byte for byte: users diff it against their files.
    manifest = models.TextField()
    parsed = models.JSONField()
    # queueing.Workload.to_json(): pod sets and total requests/limits.
    workload = models.JSONField()
    # What the planner orders by: the PriorityClass's value, or a staff override.
    priority = models.IntegerField(default=0)
    priority_class = models.CharField(max_length=253, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    source = models.CharField(max_length=16, choices=Source.choices)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Webhook submissions come from cluster identities that are not jobdash users.
    submitted_by_name = models.CharField("submitted by", max_length=255, blank=True)
    submitted_at = models.DateTimeField(auto_now_add=True)
    released_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written by the admission cycle: why a job waits and when it should start.
    position = models.PositiveIntegerField(null=True, blank=True)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    # The likely start (as many jobs start after it as before) and the late bound (90 % start
    # by then), recalibrated each cycle (queueing.eta_calibration).
    eta = models.DateTimeField(null=True, blank=True)
    eta_late = models.DateTimeField(null=True, blank=True)
    # The first range the job was given, kept: the promise a late job is measured against, the
    # namespace's track record, and (with the raw forecast) what the calibration learns from.
    eta_first_at = models.DateTimeField(null=True, blank=True)
    eta_first = models.DateTimeField(null=True, blank=True)
    eta_first_late = models.DateTimeField(null=True, blank=True)
    eta_first_forecast = models.DateTimeField(null=True, blank=True)
    # The run time predicted when the dispatcher first saw the job (queueing.predictor): likely,
    # 90 % bound, 99 % bound (what lent nodes are admitted by), and which history answered.
    predicted_duration_s = models.FloatField(null=True, blank=True)
    predicted_p90_s = models.FloatField(null=True, blank=True)
    predicted_tail_s = models.FloatField(null=True, blank=True)
    prediction_source = models.CharField(max_length=32, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # A requeued job (start timeout, transient release failure) waits until then.
    backoff_until = models.DateTimeField(null=True, blank=True)
    # Written by the release: the leader's term (fencing token), where the planner put
    # each pod, and the uid of the job's object once the cluster has it.
    leader_term = models.BigIntegerField(null=True, blank=True)
    placement = models.JSONField(null=True, blank=True)
    cluster = models.CharField(max_length=63, blank=True)  # released to (issue 49); "": the one cluster
    # Its pods on GPUs shared by memory: [role, index, [card, ...]] each (queueing/cards.py).
    cards = models.JSONField(null=True, blank=True)
    # An elastic job admitted or resized to fewer pods than written: {role: pods} it runs.
    scale = models.JSONField(null=True, blank=True)
    # An elastic job giving back its extra pods at preempt_at: {role: pods} it keeps.
    shrink_to = models.JSONField(null=True, blank=True)
    object_uid = models.CharField(max_length=64, blank=True)
    # An operator asked to requeue a Released/Running job: the web process cannot touch
    # the cluster, so the dispatcher's tracker takes the object back and requeues it.
    requeue_requested_at = models.DateTimeField(null=True, blank=True)
    # Elastic quota and preemption: admitted beyond its namespace's guarantee; how often it was
    # preempted; the job it is being preempted for and when its grace period ends; the job it
    # last made room for (its reason says so while it waits again).
    borrowing = models.BooleanField(default=False)
    preemptions = models.PositiveIntegerField(default=0)
    preempted_for = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False, db_index=False
    )
    preempt_at = models.DateTimeField(null=True, blank=True)
    # Lent capacity: the pool it runs on that is being reclaimed; it leaves at preempt_at.
    reclaimed_by = models.CharField(max_length=80, blank=True)
    # Why it leaves for preempted_for (queueing.preemption: reclaim, priority, move); when
    # defragmentation last moved it (a job moves at most once per JOBDASH_DEFRAG_WINDOW_SECONDS).
    preempt_cause = models.CharField(max_length=16, blank=True)
    moved_at = models.DateTimeField(null=True, blank=True)
    preempted_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False, db_index=False
    )
    # Workflows (issue 36): the workflow it belongs to and its index in an array; its options
    # (queueing.job_options.JobOptions.to_json: dependencies, retry policy, deadlines); the
    # retries made; the last failure as classified (queueing.failures.Failure).
    workflow = models.ForeignKey(
        Workflow, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs", db_index=False
    )
    array_index = models.PositiveIntegerField(null=True, blank=True)
    options = models.JSONField(default=dict, blank=True)
    retries = models.PositiveIntegerField(default=0)
    failure = models.JSONField(null=True, blank=True)
    # Its "start by" deadline (options' start_by), a column so the cycle finds the expired cheaply.
    start_by = models.DateTimeField(null=True, blank=True)
    # Checkpoints (issue 48), what the dispatcher reads: it writes one every checkpoint_every_s,
    # needs checkpoint_on_notice_s after a notice to write one, may not be preempted before it
    # has run min_runtime_s (its own, else its namespace's default, within the admin's ceiling);
    # null: not said. The checkpoints it reported while running (the API, or its object's
    # jobdash.io/checkpointed-at annotation) and the last one's time, which never moves back.
    checkpoint_every_s = models.FloatField(null=True, blank=True)
    checkpoint_on_notice_s = models.FloatField(null=True, blank=True)
    min_runtime_s = models.FloatField(null=True, blank=True)
    last_checkpoint_at = models.DateTimeField(null=True, blank=True)
    checkpoints = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "name"],
                condition=Q(state__in=ACTIVE_STATES),
                name="one_active_job_per_namespace_name",
            ),
            models.CheckConstraint(condition=Q(state__in=State.values), name="job_state_valid"),
        ]
        # Every write of a job row adds an entry to each index whose condition the new row
        # meets (changed_xid changes on every write: no update is HOT), and a job row is
        # written about seven times in its life. So: no index a wider one covers, and
        # indexes of columns that most rows leave empty are partial.
        indexes = [
            # The admission cycle reads pending jobs across namespaces.
            models.Index(fields=["state", "namespace", "submitted_at"], name="job_state_ns_submitted"),
            # The jobs page of one namespace, newest first.
            models.Index(fields=["namespace", "-submitted_at"], name="job_ns_submitted"),
            # Each cycle reads the most recently finished jobs for the run-time history (ETAs).
            models.Index(fields=["state", "-finished_at"], name="job_state_finished"),
            # The start-time calibration and the track record read the latest starts.
            models.Index(fields=["-started_at"], name="job_started", condition=Q(started_at__isnull=False)),
            # A namespace's track record: its latest starts.
            models.Index(
                fields=["namespace", "-started_at"], name="job_ns_started", condition=Q(started_at__isnull=False)
            ),
            # Preemption's links, set on few jobs.
            models.Index(fields=["preempted_for"], name="job_preempted_for", condition=Q(preempted_for__isnull=False)),
            models.Index(fields=["preempted_by"], name="job_preempted_by", condition=Q(preempted_by__isnull=False)),
            models.Index(fields=["workflow"], name="job_workflow", condition=Q(workflow__isnull=False)),
            models.Index(fields=["start_by"], name="job_start_by", condition=Q(start_by__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.namespace.name}/{self.name} #{self.pk}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def object_key(self) -> tuple[str, str, str]:
        """Its object's key in the cluster (jobdash.cluster.gateway.ObjectKey)."""
        return (self.kind_key, self.namespace.name, self.name)


class JobDependency(models.Model):
    """``job`` waits for ``on`` to end as ``condition`` says (Slurm's afterok/afterany/afternotok)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dependencies")
    on = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dependents")
    condition = models.CharField(max_length=8, choices=[("ok", "ok"), ("any", "any"), ("notok", "notok")])

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "on"], name="job_dependency_once"),
            models.CheckConstraint(condition=~Q(job=models.F("on")), name="job_dependency_not_self"),
        ]

    def __str__(self) -> str:
        return f"#{self.job_id} after{self.condition}:#{self.on_id}"


class JobEvent(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    type = models.CharField(max_length=32)
    message = models.TextField(blank=True)
    actor = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    # An elastic job's pods per elastic role from this event on (Running when admitted with
    # fewer, Resized, Shrunk): what usage bills it for. Null: as written, or no change.
    scale = models.JSONField(null=True, blank=True)
    # A Released event's cluster, with several (issue 49): where usage bills the run that follows.
    cluster = models.CharField(max_length=63, blank=True, default="", db_default="")

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["job", "created_at"], name="jobevent_job_time")]

    def __str__(self) -> str:
        return f"{self.type} by {self.actor}"


class PodGroupMember(models.Model):
    """A pod the webhook admitted into a pod job's group (queueing/kinds/pod.py): so that a
    group never takes more members than its count says. The pods themselves are the
    cluster's; the dispatcher counts them there."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="pod_members")
    name = models.CharField(max_length=253)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="pod_group_member_once")]

    def __str__(self) -> str:
        return self.name


class QueuedMirror(models.Model):
    """A Queued job's QueuedJob object that the dispatcher created in the cluster (written by
    the leader only). A row whose job is still Queued but whose object is gone means someone
    deleted the object: the job is cancelled. The object is made before its row and the row
    removed before its object, so a crash in between never reads as such a deletion."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="queued_mirror")
    name = models.CharField(max_length=253)  # the object's name, in the job's namespace
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"QueuedJob {self.name} of job {self.job_id}"


# The JobEvent types told to the cluster as Kubernetes Events; a database trigger (migration
# 0016) puts each such JobEvent in the EventOutbox in the JobEvent's own transaction.
CLUSTER_EVENT_TYPES = (
    "Submitted",
    "Requeued",
    "Released",
    "Running",
    "Preempted",
    "Succeeded",
    "Failed",
    "Cancelled",
    "Refused",
)


class EventOutbox(models.Model):
    """JobEvents not yet sent to the cluster as Kubernetes Events. Filled by a trigger, so
    every path that writes a JobEvent (a web process's cancel too) leaves one without
    talking to the cluster; the leader sends them each cycle and deletes what it sent, so a
    leader change loses nothing."""

    event = models.OneToOneField(JobEvent, on_delete=models.CASCADE, related_name="outbox")

    def __str__(self) -> str:
        return f"to send: event {self.event_id}"


def validate_time_zone(value: str) -> None:
    from .lent import zone

    try:
        zone(value)
    except ValueError as error:
        raise ValidationError(str(error)) from None


def validate_label_selector(value) -> None:
    if not isinstance(value, dict) or not value:
        raise ValidationError('must be an object of node labels, e.g. {"pool": "night-a"}')
    for key, label in value.items():
        if not isinstance(key, str) or not key or not isinstance(label, str):
            raise ValidationError(f"label {key!r}: keys and values must be strings")


class LentPool(models.Model):
    """Nodes the online side lends to training, nightly or until a time (lent.py); nothing new
    starts on them in the notice before they go back, and jobs admitted there are the
    ones predicted to finish first (queueing/tide.py)."""

    name = models.CharField(
        max_length=63,
        unique=True,
        validators=[
            RegexValidator(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "a DNS label: lower-case letters, digits and '-'")
        ],
    )
    node_selector = models.JSONField(
        default=dict,
        validators=[validate_label_selector],
        help_text='The nodes lent: their labels, e.g. {"pool": "night-a"}.',
    )
    kind = models.CharField(max_length=8, choices=[(k, k) for k in ("nightly", "until")], default="nightly")
    start = models.TimeField(null=True, blank=True, help_text="Nightly: when the nodes are lent, e.g. 22:00.")
    end = models.TimeField(null=True, blank=True, help_text="Nightly: when they go back, e.g. 08:00 (the next day).")
    timezone = models.CharField(
        max_length=64, default="UTC", validators=[validate_time_zone], help_text="IANA time zone of start and end."
    )
    until = models.DateTimeField(null=True, blank=True, help_text="Until: when the nodes go back, once.")
    notice_seconds = models.PositiveIntegerField(
        default=1800, help_text="Nothing new starts on the pool this long before it goes back."
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.kind == "nightly":
            missing = {name: "a nightly pool needs it" for name in ("start", "end") if getattr(self, name) is None}
            if missing:
                raise ValidationError(missing)
            if self.start == self.end:
                raise ValidationError({"end": "must differ from start"})
        elif self.until is None:
            raise ValidationError({"until": "a pool lent until a time needs it"})


class LostWork(models.Model):
    """Work a running job must do again because jobdash stopped it (issue 48): its run since
    its last checkpoint, and that times its GPUs (usage.lost_work). One row per stop, written
    with the stop. Labels copied and the job a plain number: it outlives the job (retention)."""

    class Cause(models.TextChoices):
        PREEMPTION = "preemption"
        RECLAIM = "reclaim", "reclaim of lent nodes"
        MOVE = "move", "move to make room"
        CLUSTER = "cluster", "its cluster lost"

    job_id = models.BigIntegerField()
    at = models.DateTimeField()
    cause = models.CharField(max_length=16, choices=Cause.choices)
    namespace = models.CharField(max_length=63)
    user = models.CharField(max_length=255, blank=True)
    kind = models.CharField(max_length=63, blank=True)
    priority_class = models.CharField(max_length=253, blank=True)
    borrowed = models.BooleanField(default=False)
    cluster = models.CharField(max_length=63, blank=True, default="")  # where it ran (issue 49); "": the one
    seconds = models.FloatField(default=0.0)  # of its run, redone
    gpu_s = models.FloatField(default=0.0)  # those seconds times the GPUs it held
    checkpointed_at = models.DateTimeField(null=True, blank=True)  # the checkpoint it resumes from

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            models.Index(fields=["at", "namespace"], name="lost_work_at_namespace"),
            models.Index(fields=["job_id"], name="lost_work_job"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.gpu_s / 3600:.2f} GPU-h lost to {self.cause}"
