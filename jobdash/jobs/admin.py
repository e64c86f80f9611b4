"""The operators' console. Every change to a job goes through jobdash.jobs.services."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from . import selectors, services
from .exceptions import JobdashError
from .forms import SubmitForm
from .models import Job, JobEvent, Namespace, Source


@admin.register(Namespace)
class NamespaceAdmin(admin.ModelAdmin):
    list_display = ["name", "weight", "created_at"]
    search_fields = ["name"]
    filter_horizontal = ["members", "groups"]


class JobEventInline(admin.TabularInline):
    model = JobEvent
    fields = ["created_at", "type", "message", "actor"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


class PriorityActionForm(ActionForm):
    priority = forms.IntegerField(required=False, help_text="for “Set priority”")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "namespace", "state", "priority", "source", "submitted_by_name", "submitted_at"]
    list_filter = ["state", "namespace", "source"]
    search_fields = ["name", "submitted_by_name"]
    list_select_related = ["namespace"]
    ordering = ["-submitted_at"]
    action_form = PriorityActionForm
    actions = ["cancel_jobs", "set_priority"]
    inlines = [JobEventInline]
    fields = [
        "namespace", "name", "kind", "api_version", "state", "priority", "source", "submitted_by_name",
        "submitted_at", "released_at", "started_at", "finished_at", "position", "reason", "message",
        "eta", "attempts", "manifest",
    ]
    readonly_fields = fields

    def has_delete_permission(self, request, obj=None):
        return False  # jobs are cancelled, never silently deleted

    def has_change_permission(self, request, obj=None):
        # The change page is for reading; changes go through the actions (services).
        return request.method in ("GET", "HEAD") and super().has_change_permission(request, obj)

    @admin.action(description="Cancel selected jobs")
    def cancel_jobs(self, request, queryset):
        self._each(request, queryset, lambda job: services.job_cancel(job_id=job.pk, user=request.user), "cancelled")

    @admin.action(description="Set priority of selected jobs")
    def set_priority(self, request, queryset):
        priority = request.POST.get("priority", "")
        if priority == "":
            self.message_user(request, "Enter a priority next to the action first.", messages.ERROR)
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
        job = form.submit(user=request.user, source=Source.ADMIN) if request.method == "POST" and form.is_valid() else None
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
