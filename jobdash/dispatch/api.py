from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from jobdash.jobs.selectors import state_counts

from . import status


@extend_schema(responses={200: {"type": "object"}})
@api_view(["GET"])
def status_view(request):
    """The leader (identity, term, since, alive), the last cycle, and job counts per state."""
    return Response({
        "leader": status.leader(),
        "last_cycle": status.last_cycle(),
        "tick_seconds": settings.JOBDASH_TICK_SECONDS,
        "policy": settings.JOBDASH_POLICY,
        "jobs": state_counts(),
    })
