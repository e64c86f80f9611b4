"""/readyz: readiness as dispatcher_health says it, as the pages' banner, the API's status
and the job reasons do. Liveness (/healthz) is jobdash/health.py's."""

from django.http import JsonResponse
from django.views.decorators.http import require_safe

from .dispatcher_health import dispatcher_health
from .selectors import sees_all_namespaces


@require_safe
def readyz(request):
    """503 naming the cause while the dispatcher is not completing cycles, else 200 with the
    leader, its term and the last completed cycle. For monitors and alerts, not the web's
    readiness probe: a web taken out of its Service could not show the banner that says why."""
    staff = request.user.is_authenticated and sees_all_namespaces(request.user)
    health = dispatcher_health(reveal=staff)
    if not health.healthy:
        body = {key: value for key, value in health.as_json().items() if key != "healthy"}
        return JsonResponse({"status": "unavailable", **body}, status=503)
    return JsonResponse(
        {"status": "ready", "leader": health.leader, "term": health.leader["term"], "last_cycle": health.last_cycle}
    )
