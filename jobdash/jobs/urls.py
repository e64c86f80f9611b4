from django.urls import path

from . import health_views, views, workflow_views

urlpatterns = [
    path("", views.home, name="home"),
    path("ns/<str:name>/", views.namespace_jobs, name="namespace-jobs"),
    path("submit/", views.submit, name="submit"),
    path("jobs/<int:job_id>/", views.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/cancel/", views.job_cancel, name="job-cancel"),
    path("jobs/<int:job_id>/priority/", views.job_priority, name="job-priority"),
    path("jobs/<int:job_id>/requeue/", views.job_requeue, name="job-requeue"),
    path("submit/check/", views.submit_check, name="submit-check"),
    path("cluster/", views.cluster, name="cluster"),
    # (beside /healthz, which jobdash/urls.py routes: readiness reads what the dispatcher recorded)
    path("readyz", health_views.readyz, name="readyz"),
    path("workflows/", workflow_views.workflow_list, name="workflow-list"),
    path("workflows/<int:workflow_id>/", workflow_views.workflow_detail, name="workflow-detail"),
    path("workflows/<int:workflow_id>/cancel/", workflow_views.workflow_cancel, name="workflow-cancel"),
]
