from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response

# the same leader and cycle objects as GET /api/v1/cluster/
from jobdash.jobs.api.cluster import CycleSerializer, LeaderSerializer
from jobdash.jobs.selectors import state_counts

from . import status


class LastCycleSerializer(CycleSerializer):
    phases = serializers.DictField(child=serializers.FloatField(), help_text="phase -> milliseconds")


class StatusSerializer(serializers.Serializer):
    """Only documents the response (the view builds it from dispatch.status)."""

    leader = LeaderSerializer()
    last_cycle = LastCycleSerializer(allow_null=True)
    tick_seconds = serializers.FloatField()
    policy = serializers.CharField()
    jobs = serializers.DictField(child=serializers.IntegerField(), help_text="state -> number of jobs")


@extend_schema(responses={200: StatusSerializer})
@api_view(["GET"])
def status_view(request):
    """The leader (identity, term, since, alive), the last cycle, and job counts per state."""
    return Response(
        {
            "leader": status.leader(),
            "last_cycle": status.last_cycle(),
            "tick_seconds": settings.JOBDASH_TICK_SECONDS,
            "policy": settings.JOBDASH_POLICY,
            "jobs": state_counts(),
        }
    )
