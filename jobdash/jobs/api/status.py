"""GET /api/v1/status/: the leader, the last cycle, and job counts per state."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response

from .. import cluster_selectors
from ..selectors import job_counts_by_state, sees_all_namespaces

# the same leader and cycle objects as GET /api/v1/cluster/
from .cluster import CycleSerializer, LeaderSerializer


class LastCycleSerializer(CycleSerializer):
    phases = serializers.DictField(child=serializers.FloatField(), help_text="phase -> milliseconds")


class StatusSerializer(serializers.Serializer):
    """Only documents the response (the view builds it from jobs.cluster_selectors)."""

    leader = LeaderSerializer()
    last_cycle = LastCycleSerializer(allow_null=True)
    tick_seconds = serializers.FloatField()
    policy = serializers.CharField()
    jobs = serializers.DictField(child=serializers.IntegerField(), help_text="state -> number of jobs")


@extend_schema(responses={200: StatusSerializer})
@api_view(["GET"])
def status_view(request):
    """The leader (term, since, alive; its host and process for staff only), the last cycle,
    and job counts per state of the namespaces the caller may see."""
    return Response(
        {
            "leader": cluster_selectors.leader(reveal_identity=sees_all_namespaces(request.user)),
            "last_cycle": cluster_selectors.last_cycle(),
            "tick_seconds": settings.JOBDASH_TICK_SECONDS,
            "policy": settings.JOBDASH_POLICY,
            "jobs": job_counts_by_state(request.user),
        }
    )
