"""Server-rendered pages. Thin: parse, call one service or selector, render."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from . import examples, selectors, services
from .exceptions import JobdashError, NotFound
from .forms import CancelForm, SubmitForm
from .models import Source, State
from .presenters import demand_summary, pod_set_rows


def _visible_job(user, job_id: int):
    try:
        return selectors.job_get_visible(user, job_id)
    except NotFound:
        raise Http404("job not found") from None


@login_required
def home(request):
    return render(request, "jobs/home.html", {"namespaces": selectors.namespace_summaries(request.user)})


@login_required
def namespace_jobs(request, name: str):
    try:
        namespace = selectors.namespace_get_visible(request.user, name)
    except NotFound:
        raise Http404("namespace not found") from None
    state = request.GET.get("state", "")
    jobs = selectors.jobs_visible_to(request.user).filter(namespace=namespace)
    if state in State.values:
        jobs = jobs.filter(state=state)
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    for job in page:
        job.demand = demand_summary(job.workload)
    return render(
        request,
        "jobs/namespace.html",
        {"namespace": namespace, "page": page, "state": state, "states": State.values},
    )


@login_required
def job_detail(request, job_id: int):
    job = _visible_job(request.user, job_id)
    context = {
        "job": job,
        "demand": demand_summary(job.workload),
        "pod_sets": pod_set_rows(job.workload),
        "events": selectors.job_events(job),
        "manifest_lines": job.manifest.splitlines(),
    }
    return render(request, "jobs/job_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def job_cancel(request, job_id: int):
    job = _visible_job(request.user, job_id)
    form = CancelForm(request.POST if request.method == "POST" else None)
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
    if request.method == "POST":
        form = SubmitForm(request.POST, namespaces=namespaces)
        job = form.submit(user=request.user, source=Source.WEB) if form.is_valid() else None
        if job is not None:
            messages.success(request, f"Job {job.name} queued in {job.namespace.name}.")
            return redirect("job-detail", job_id=job.pk)
    else:
        initial = {"namespace": namespaces[0] if len(namespaces) == 1 else ""}
        example = request.GET.get("example")
        if example:
            initial["manifest"] = examples.example_text(example) or ""
        form = SubmitForm(initial=initial, namespaces=namespaces)
    return render(
        request,
        "jobs/submit.html",
        {"form": form, "examples": examples.example_names()},
    )
