"""The operators' console. Every change to a job goes through jobdash.jobs.services."""

from typing import cast

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from queueing import POLICY_NAMES

from . import elastic, selectors, services
from .exceptions import JobdashError
from .forms import SubmitForm
from .models import Job, JobEvent, LentPool, Namespace, Source

# A page to read, not to edit: no Save buttons (changes go through the actions).
READ_ONLY = {"show_save": False, "show_save_and_continue": False, "show_save_and_add_another": False}


class NamespaceForm(forms.ModelForm):
    # Choices read at run time (the model validates names without `choices`, see models.py).
    policy = forms.ChoiceField(required=False, help_text=Namespace._meta.get_field("policy").help_text)

    class Meta:
        model = Namespace
        fields = [
            "name",
            "members",
            "groups",
            "weight",
            "policy",
            "default_priority_class",
            "max_priority_class",
            "queue_all_pods",
            "guaranteed",
            "cohort",
            "borrowing_limit",
        ]
        widgets = {
            "guaranteed": forms.Textarea(attrs={"rows": 3, "cols": 60}),
            "borrowing_limit": forms.Textarea(attrs={"rows": 3, "cols": 60}),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["policy"]).choices = [("", f"(global: {settings.JOBDASH_POLICY})")] + [
            (name, name) for name in POLICY_NAMES
        ]

    def clean_guaranteed(self):
        return self.cleaned_data["guaranteed"] or {}  # an empty box: not elastic

    def clean_borrowing_limit(self):
        return self.cleaned_data["borrowing_limit"] or {}

    def clean(self):
        """Elastic quota checked by the service's own rules, each problem on its field;
        namespace_save checks again under the lock when it saves."""
        super().clean()
        cleaned = self.cleaned_data
        if any(field in self.errors for field in ("name", *elastic.FIELDS)):
            return cleaned
        probe = Namespace(pk=self.instance.pk, name=cleaned.get("name", self.instance.name))
        try:
            cleaned.update(services.elastic_quota_check(probe, **{f: cleaned.get(f) for f in elastic.FIELDS}))
        except ValidationError as error:
            self.add_error(None, error)
        return cleaned


@admin.register(Namespace)
class NamespaceAdmin(admin.ModelAdmin):
    form = NamespaceForm
    list_display = [
        "name",
        "weight",
        "policy_shown",
        "default_priority_class",
        "max_priority_class",
        "guaranteed_shown",
        "cohort_shown",
        "queue_all_pods",
        "member_count",
        "group_count",
        "created_at",
    ]
    list_filter = ["policy", "cohort"]
    search_fields = ["name", "cohort"]
    filter_horizontal = ["members", "groups"]
    fieldsets = [
        (None, {"fields": ["name", "members", "groups", "roles_from"]}),
        (
            "Queueing",
            {
                "fields": [
                    "weight",
                    "policy",
                    "default_priority_class",
                    "max_priority_class",
                    "queue_all_pods",
                    "default_max_run_seconds",
                    "default_min_runtime_seconds",
                ]
            },
        ),
        ("Budget", {"fields": ["gpu_hour_budget", "over_budget"]}),
        (
            "Elastic quota",
            {
                "fields": ["guaranteed", "cohort", "borrowing_limit"],
                "description": "The ResourceQuota hard stays the ceiling. A guaranteed share is always given back "
                "(borrowers are preempted for it); beyond it the namespace borrows what its cohort leaves idle. "
                'Quota keys as in a ResourceQuota, quantities as text: {"requests.nvidia.com/gpu": "16", '
                '"requests.cpu": "64"}. Limits and object counts cannot be guaranteed.',
            },
        ),
    ]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(member_count=Count("members", distinct=True), group_count=Count("groups", distinct=True))
        )

    readonly_fields = ["roles_from"]

    @admin.display(description="roles come from")
    def roles_from(self, _namespace) -> str:
        """What the members above grant (jobs/roles.py), so the console does not promise more."""
        mode = settings.JOBDASH_ROLES_FROM
        said = {
            "rbac": "the cluster's RBAC only: RoleBindings to view, edit or admin here; the members above grant nothing",
            "membership": "this console: the members above (and the groups' users) edit; staff administer",
            "both": "the cluster's RBAC and this console: the members above edit, a RoleBinding may grant more",
        }
        return f"{said[mode]} (JOBDASH_ROLES_FROM={mode})"

    @admin.display(description="policy", ordering="policy")
    def policy_shown(self, namespace) -> str:
        return namespace.policy or f"(global: {settings.JOBDASH_POLICY})"

    @admin.display(description="guaranteed")
    def guaranteed_shown(self, namespace) -> str:
        return ", ".join(f"{key} {value}" for key, value in namespace.guaranteed.items()) or "–"

    @admin.display(description="cohort", ordering="cohort")
    def cohort_shown(self, namespace) -> str:
        return namespace.cohort or ("(cluster-wide)" if namespace.guaranteed else "–")

    @admin.display(description="members", ordering="member_count")
    def member_count(self, namespace) -> int:
        return namespace.member_count

    @admin.display(description="groups", ordering="group_count")
    def group_count(self, namespace) -> int:
        return namespace.group_count

    def has_delete_permission(self, request, obj=None):
        return False  # jobs reference their namespace (PROTECT): they are never deleted

    def save_model(self, request, obj, form, change):
        services.namespace_save(obj)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        """The form checked the elastic quota; namespace_save checks it again under the lock.
        Refused there (another admin's edit to the cohort committed in between): the whole
        save was rolled back, and the page says why instead of failing."""
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ValidationError as error:
            for field, problems in error.message_dict.items():
                for problem in problems:
                    self.message_user(request, f"Not saved: {field}: {problem}", messages.ERROR)
            return redirect(request.get_full_path())


class JobEventInline(admin.TabularInline):
    model = JobEvent
    fields = readonly_fields = ("created_at", "type", "message", "actor")
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


class JobActionForm(ActionForm):
    # Plain text, not IntegerField: the service validates and names the field itself.
    priority = forms.CharField(required=False, help_text="for “Set priority”")
    reason = forms.CharField(required=False, max_length=200, help_text="for “Cancel” and “Requeue”")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "name",
        "namespace",
        "state",
        "priority",
        "priority_class",
        "position",
        "reason",
        "borrowing",
        "preemptions",
        "source",
        "submitted_by_name",
        "submitted_at",
    ]
    list_filter = ["state", "namespace", "source", "reason", "borrowing"]
    search_fields = ["name", "submitted_by_name"]
    list_select_related = ["namespace"]
    ordering = ["-submitted_at"]
    action_form = JobActionForm
    actions = ["cancel_jobs", "requeue_jobs", "set_priority"]
    inlines = [JobEventInline]
    fields = readonly_fields = (
        "namespace",
        "name",
        "kind",
        "api_version",
        "state",
        "priority",
        "priority_class",
        "source",
        "submitted_by_name",
        "submitted_at",
        "released_at",
        "started_at",
        "finished_at",
        "position",
        "reason",
        "message",
        "eta",
        "eta_late",
        "eta_first_at",
        "eta_first",
        "eta_first_late",
        "predicted_duration_s",
        "predicted_p90_s",
        "predicted_tail_s",
        "prediction_source",
        "attempts",
        "requeue_requested_at",
        "borrowing",
        "preemptions",
        "preempted_for",
        "preempt_at",
        "preempted_by",
        "checkpoint_every_s",
        "checkpoint_on_notice_s",
        "min_runtime_s",
        "last_checkpoint_at",
        "checkpoints",
        "manifest_as_submitted",
    )

    def has_delete_permission(self, request, obj=None):
        return False  # jobs are cancelled, never silently deleted

    def has_change_permission(self, request, obj=None):
        # The change page is for reading; changes go through the actions (services).
        return request.method in ("GET", "HEAD") and super().has_change_permission(request, obj)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return super().change_view(request, object_id, form_url, {**READ_ONLY, **(extra_context or {})})

    @admin.display(description="manifest")
    def manifest_as_submitted(self, job: Job) -> str:
        # Preformatted: YAML's indentation is its structure.
        return format_html('<pre class="manifest">{}</pre>', job.manifest)

    @admin.action(description="Cancel selected jobs")
    def cancel_jobs(self, request, queryset):
        reason = request.POST.get("reason", "").strip()
        self._each(
            request,
            queryset,
            lambda job: services.job_cancel(job_id=job.pk, user=request.user, reason=reason),
            "cancelled",
        )

    @admin.action(description="Requeue selected jobs")
    def requeue_jobs(self, request, queryset):
        """Released/Running jobs are requeued by the dispatcher (it owns the cluster);
        never-started Failed jobs at once. See services.job_requeue."""
        reason = request.POST.get("reason", "").strip()
        self._each(
            request,
            queryset,
            lambda job: services.job_requeue(job_id=job.pk, user=request.user, reason=reason),
            "requeued (or marked for the dispatcher to requeue)",
        )

    @admin.action(description="Set priority of selected jobs")
    def set_priority(self, request, queryset):
        priority = request.POST.get("priority", "")
        if priority == "":
            self.message_user(request, "Enter a priority next to the action first.", messages.ERROR)
            return
        try:  # once, not once per selected job
            priority = services.validate_priority(priority)
        except JobdashError as error:
            self.message_user(request, error.message, messages.ERROR)
            return
        self._each(
            request,
            queryset,
            lambda job: services.job_set_priority(job_id=job.pk, user=request.user, priority=priority),
            f"set to priority {priority}",
        )

    def _each(self, request, queryset, act, done: str):
        succeeded = 0
        for job in queryset:
            try:
                act(job)
                succeeded += 1
            except JobdashError as error:
                self.message_user(request, f"{job}: {error.message}", messages.WARNING)
        if succeeded:
            self.message_user(request, f"{succeeded} job(s) {done}.", messages.SUCCESS)

    def add_view(self, request, form_url="", extra_context=None):
        """Admins submit like users do, through job_submit, recorded with source `admin`."""
        namespaces = [ns.name for ns in selectors.namespaces_visible_to(request.user)]
        form = SubmitForm(request.POST if request.method == "POST" else None, namespaces=namespaces)
        job = (
            form.submit(user=request.user, source=Source.ADMIN)
            if request.method == "POST" and form.is_valid()
            else None
        )
        if job is not None:
            self.message_user(request, f"Job {job} queued.", messages.SUCCESS)
            return redirect(reverse("admin:jobs_job_change", args=[job.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": "Submit a job",
            "opts": self.model._meta,
            "form": form,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/jobs/job/submit.html", context)


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    def change_view(self, request, object_id, form_url="", extra_context=None):
        return super().change_view(request, object_id, form_url, {**READ_ONLY, **(extra_context or {})})

    list_display = ["created_at", "job", "type", "actor", "message"]
    list_filter = ["type"]
    search_fields = ["job__name", "actor"]
    list_select_related = ["job", "job__namespace"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return request.method in ("GET", "HEAD") and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(LentPool)
class LentPoolAdmin(admin.ModelAdmin):
    """Nodes lent for the night or until a time: the model's clean() names a missing field,
    so a half-declared pool is refused on the form, never saved."""

    list_display = ("name", "kind", "start", "end", "timezone", "until", "notice_seconds", "enabled", "lent_now")
    list_filter = ("kind", "enabled")
    search_fields = ("name",)

    @admin.display(description="lent now (reclaimed at)")
    def lent_now(self, pool: LentPool) -> str:
        from django.utils import timezone

        from .lent import window

        found = window(pool, timezone.now())
        return "no" if found is None else f"yes, until {found.reclaim_at:%Y-%m-%d %H:%M %Z}"
