"""Server-rendered pages. Thin: parse, call one service or selector, render."""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from . import (
    charts,
    cluster_selectors,
    dashboard,
    elastic,
    estimates,
    examples,
    presenters,
    priority,
    roles,
    selectors,
    services,
    stream_preview,
    workflow_presenters,
)
from .budgets import budget_words
from .dispatcher_health import Health, dispatcher_health, waiting_reason
from .exceptions import InvalidInput, JobdashError, NotFound, NotMember
from .forms import OPTION_FIELDS, PriorityForm, ReasonForm, SubmitForm
from .models import Job, Source, State, Workflow
from .presenters import cluster_page
from .words import lost_total_words

# How often live parts of pages ask for news: a cycle runs every JOBDASH_TICK_SECONDS.
POLL_SECONDS = 3


def _visible_job(user, job_id: int):
    try:
        return selectors.job_get_visible(user, job_id)
    except NotFound:
        raise Http404("job not found") from None


@login_required
def home(request):
    return render(
        request,
        "jobs/home.html",
        {"namespaces": selectors.namespace_summaries(request.user), "my_jobs": selectors.jobs_of(request.user)},
    )


def _decorate(jobs, now, health: Health) -> None:
    """What a table row shows, computed from the row alone (no extra queries). A waiting
    job's reason says so while the dispatcher is not completing cycles (`health`)."""
    for job in jobs:
        job.demand = presenters.page_demand(job.workload)
        job.waiting = presenters.since(job.submitted_at, now)
        reason, job.waiting_message = (
            waiting_reason(job.reason, job.message, health) if job.state == State.QUEUED else (job.reason, job.message)
        )
        job.reason_words = presenters.reason_words(reason)
        job.start_range = presenters.start_range(job.eta, job.eta_late, now)
        job.past_late_bound = estimates.past_late_bound(job, now)
        job.elapsed = presenters.since(job.started_at or job.released_at, now)
        if job.finished_at and job.started_at:
            job.ran = presenters.duration((job.finished_at - job.started_at).total_seconds())
        # Elastic quota: what the job holds beyond its guarantee, and whether it is leaving for another job.
        holds = job.state in (State.RELEASED, State.RUNNING)
        job.borrowing_now = holds and job.borrowing
        job.leaving = holds and job.preempted_for_id is not None
        job.leave_words = presenters.until(job.preempt_at, now) if job.leaving else ""


@login_required
def namespace_jobs(request, name: str):
    """The dashboard of one namespace. htmx requests (polling, filters) get the live part only."""
    try:
        namespace = selectors.namespace_get_visible(request.user, name)
    except NotFound:
        raise Http404("namespace not found") from None
    filters = dashboard.Filters.parse(request.GET)
    now = timezone.now()
    shown = dashboard.namespace_page(
        namespace,
        filters,
        page=request.GET.get("page"),
        running_page_number=request.GET.get("rpage"),
        live=bool(request.htmx),
        now=now,
    )
    tables = {"queue": shown.queue, "running": shown.running, "finished": shown.finished}
    # (also the banner's: one read of the dispatcher's health a page)
    health = dispatcher_health(reveal=selectors.sees_all_namespaces(request.user))
    for table in tables.values():
        if table is not None:
            _decorate(table, now, health)
    context: dict[str, Any] = {
        "namespace": namespace,
        "filters": filters,
        "states": dashboard.STATE_FILTERS,
        "kinds": dashboard.kind_filters(),
        "now": now,
        "counts": shown.counts,
        "quota_bars": presenters.quota_bars(shown.quota, elastic.amounts(namespace.guaranteed)),
        "poll_seconds": POLL_SECONDS,
        "dispatcher": health,
        "several_clusters": shown.several_clusters,
        **tables,
    }
    if shown.history is None:
        return render(request, "jobs/_namespace_live.html", context)
    context["role"] = roles.grant(request.user, namespace)
    context["chart"] = charts.queue_chart(shown.history)
    context["estimate_record"] = presenters.estimate_record_words(shown.estimates or estimates.EstimateRecord())
    return render(request, "jobs/namespace.html", context)


@login_required
def job_detail(request, job_id: int):
    """The job page. htmx polling gets the live part (state, facts, pods, events) only."""
    with selectors.one_snapshot():  # the state badge and the timeline must agree
        job = _visible_job(request.user, job_id)
        events = list(selectors.job_events(job))
        pods = dashboard.job_pods(job)
        dependencies = selectors.job_dependencies(job)
        stops = selectors.lost_work_of(job.pk) if job.preemptions else []
    now = timezone.now()
    staff = selectors.sees_all_namespaces(request.user)
    health = dispatcher_health(reveal=staff)  # (also the banner's: one read a page)
    _decorate([job], now, health)
    # The job page alone: the first range it was given (while it waits, once the range has
    # moved), how that did once it started, and its predicted run time.
    moved = (job.eta_first, job.eta_first_late) != (job.eta, job.eta_late)
    if job.state == State.QUEUED and job.eta_first is not None and (moved or job.past_late_bound):
        job.first_range = presenters.start_range(job.eta_first, job.eta_first_late, now)
        job.first_given = presenters.since(job.eta_first_at, now)
    job.first_estimate_words = presenters.first_estimate_words(estimates.first_estimate_outcome(job))
    job.run_time_words = presenters.predicted_run_time(
        job.predicted_duration_s, job.predicted_p90_s, job.prediction_source
    )
    context = {
        "job": job,
        "now": now,
        "events": events,
        "pods": presenters.pod_rows(pods.get("replicas", {}), job.workload),
        "placement": presenters.placement_rows(job.placement, pods.get("pods", []), job.cards),
        "staff": staff,
        "dispatcher": health,
        "may_cancel": roles.may_act_on(request.user, job),
        "priority_form": PriorityForm(initial={"priority": job.priority}),
        "poll_seconds": POLL_SECONDS,
        "workflow": workflow_presenters.job_facts(job, dependencies),
        "lost_work": lost_total_words([(stop["cause"], stop["gpu_hours"] * 3600) for stop in stops]) if stops else "",
        "budget": budget_words(job.namespace.name, selectors.cluster_quotas().get(job.namespace.name, {}).get("budget"))
        if job.is_active
        else "",
        # Several clusters (issue 49): the one it was released to, and whether that one answers.
        "cluster_trouble": cluster_selectors.cluster_trouble(job.cluster) if job.is_active else "",
    }
    if request.htmx:
        return render(request, "jobs/_job_live.html", context)
    context.update(
        {
            "demand": job.demand,
            "pod_sets": presenters.pod_set_rows(
                job.workload,
                presenters.elastic_sizes(job.workload, job.scale, job.released_at is not None),
            ),
            "manifest_lines": job.manifest.splitlines(),
        }
    )
    return render(request, "jobs/job_detail.html", context)


def _staff_action(request, job: Job, action) -> HttpResponse:
    """Run a staff-only service on a job and come back to the job page with its outcome."""
    try:
        message = action(job)
        messages.success(request, message)
    except InvalidInput as error:
        messages.error(request, "; ".join(str(p) for p in error.problems))
    except JobdashError as error:
        messages.error(request, error.message)
    return redirect("job-detail", job_id=job.pk)


@login_required
@require_POST
def job_priority(request, job_id: int):
    form = PriorityForm(request.POST)
    if not form.is_valid():
        for problem in form.errors.get("priority", []):
            messages.error(request, f"priority: {problem}")
        return redirect("job-detail", job_id=job_id)

    def change(job):
        services.job_set_priority(job_id=job.pk, user=request.user, priority=form.cleaned_data["priority"])
        return f"Priority of {job.name} set to {form.cleaned_data['priority']}."

    return _staff_action(request, _visible_job(request.user, job_id), change)


@login_required
@require_http_methods(["GET", "POST"])
def job_requeue(request, job_id: int):
    job = _visible_job(request.user, job_id)
    if not selectors.sees_all_namespaces(request.user):
        raise PermissionDenied("only staff may requeue a job")
    form = ReasonForm(request.POST if request.method == "POST" else None)
    if request.method == "GET" or not form.is_valid():
        return render(request, "jobs/job_requeue.html", {"job": job, "form": form})

    def requeue(job):
        services.job_requeue(job_id=job.pk, user=request.user, reason=form.cleaned_data["reason"])
        return f"Job {job.name} goes back to the queue."

    return _staff_action(request, job, requeue)


@login_required
@require_http_methods(["GET", "POST"])
def job_cancel(request, job_id: int):
    job = _visible_job(request.user, job_id)
    try:
        roles.require_on_job(request.user, job, f"cancelling job {job.pk}")
    except NotMember as refused:
        raise PermissionDenied(refused.message) from None
    form = ReasonForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.job_cancel(job_id=job.pk, user=request.user, reason=form.cleaned_data["reason"])
            messages.success(request, f"Job {job.name} cancelled.")
        except JobdashError as error:
            messages.error(request, error.message)
        return redirect("job-detail", job_id=job.pk)
    return render(request, "jobs/job_cancel.html", {"job": job, "form": form})


@login_required
@require_http_methods(["GET", "POST"])
def submit(request):
    namespaces = [ns.name for ns in selectors.namespaces_visible_to(request.user)]
    classes = priority.priority_classes()
    if request.method == "POST":
        form = SubmitForm(request.POST, namespaces=namespaces, priority_classes=classes)
        made = form.submit(user=request.user, source=Source.WEB) if form.is_valid() else None
        if isinstance(made, Workflow):
            messages.success(request, f"Workflow {made.name} queued in {made.namespace.name}.")
            return redirect("workflow-detail", workflow_id=made.pk)
        if made is not None:
            messages.success(request, f"Job {made.name} queued in {made.namespace.name}.")
            return redirect("job-detail", job_id=made.pk)
    else:
        initial = {"namespace": namespaces[0] if len(namespaces) == 1 else ""}
        example = request.GET.get("example")
        if example:
            initial["manifest"] = examples.example_text(example) or ""
            initial["array"] = examples.example_array(initial["manifest"])  # (sweep.yaml's 0-9%3)
        form = SubmitForm(initial=initial, namespaces=namespaces, priority_classes=classes)
    return render(
        request,
        "jobs/submit.html",
        {
            "form": form,
            "option_fields": [form[name] for name in OPTION_FIELDS],
            "examples": examples.example_names(),
            "staff": selectors.sees_all_namespaces(request.user),
        },
    )


@login_required
@require_POST
def submit_check(request):
    """As people type (htmx, debounced): problems with field paths and lines, or the demand
    and whether it fits the namespace's quota now; of whatever the form submits (one job, a
    workflow, an array). A read: nothing is stored."""
    manifest = request.POST.get("manifest", "")
    if not manifest.strip():
        return render(request, "jobs/_submit_check.html", {"empty": True})
    post = request.POST
    result = stream_preview.submit_preview(request.user, manifest, post.get("namespace", ""), post.get("array", ""))
    return render(request, "jobs/_submit_check.html", {"preview": result})


@login_required
def cluster(request):
    if not selectors.sees_all_namespaces(request.user):
        raise PermissionDenied("the cluster page is for staff")
    # ?cluster=west: that cluster's nodes alone (a name no node has: an empty table).
    overview = cluster_page(cluster_selectors.cluster_overview(cluster=request.GET.get("cluster", "").strip()))
    levels = ", ".join(cluster_selectors.topology_levels())
    return render(request, "jobs/cluster.html", {"cluster": overview, "topology_levels": levels})
