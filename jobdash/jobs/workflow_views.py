"""The workflow pages (issue 36): the list, one workflow (its progress, its graph or grid as
server-rendered SVG, its jobs) and its one cancel. Thin: parse, call a selector or the
service, render."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from . import selectors, workflow_graph, workflow_presenters, workflows
from .exceptions import JobdashError, NotFound, NotMember
from .models import Workflow

PAGE_SIZE = 50


def _visible_workflow(user, workflow_id: int) -> Workflow:
    try:
        return selectors.workflow_get_visible(user, workflow_id)
    except NotFound:
        raise Http404("workflow not found") from None  # (a non-member learns nothing of it)


@login_required
def workflow_list(request):
    namespaces = [ns.name for ns in selectors.namespaces_visible_to(request.user)]
    chosen = request.GET.get("namespace", "")
    shown = selectors.workflows_visible_to(request.user)
    if chosen:
        shown = shown.filter(namespace__name=chosen)
    page = Paginator(shown, PAGE_SIZE).get_page(request.GET.get("page"))
    counts = selectors.workflow_counts(workflow.pk for workflow in page)
    rows = [{"workflow": w, "progress": workflow_presenters.progress(counts.get(w.pk, {}))} for w in page]
    return render(
        request,
        "jobs/workflows.html",
        {"rows": rows, "page": page, "namespaces": namespaces, "chosen": chosen},
    )


@login_required
def workflow_detail(request, workflow_id: int):
    workflow = _visible_workflow(request.user, workflow_id)
    jobs = selectors.workflow_jobs(workflow)
    progress = workflow_presenters.job_progress(jobs)
    active = progress["total"] > progress["finished"]
    context = {
        "workflow": workflow,
        "progress": progress,
        "graph": workflow_graph.drawing(workflow.kind, workflow_presenters.graph_jobs(jobs)),
        "rows": workflow_presenters.job_rows(jobs),
        "may_cancel": active and workflow.cancelled_at is None and workflows.may_cancel(request.user, workflow),
    }
    return render(request, "jobs/workflow_detail.html", context)


@login_required
@require_POST
def workflow_cancel(request, workflow_id: int):
    workflow = _visible_workflow(request.user, workflow_id)
    try:
        workflows.workflow_cancel(workflow_id=workflow.pk, user=request.user)
        messages.success(request, f"Workflow {workflow.name}: every active job cancelled.")
    except NotMember as refused:
        raise PermissionDenied(refused.message) from None
    except JobdashError as error:
        messages.error(request, error.message)
    return redirect("workflow-detail", workflow_id=workflow.pk)
