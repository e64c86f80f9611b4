"""GET /api/v1/status/: the leader, the last cycle, the dispatcher's health (what `jobdash
status` prints) and job counts per state."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response

from .. import cluster_selectors
from ..dispatcher_health import dispatcher_health
from ..selectors import job_counts_by_state, sees_all_namespaces

# the same leader and cycle objects as GET /api/v1/cluster/
from .cluster import CycleSerializer, LeaderSerializer


class LastCycleSerializer(CycleSerializer):
    phases = serializers.DictField(child=serializers.FloatField(), help_text="phase -> milliseconds")


class RecordedLeaderSerializer(serializers.Serializer):
    backend = serializers.CharField()
    identity = serializers.CharField(allow_null=True, help_text="host:pid, for staff only")
    term = serializers.IntegerField(allow_null=True)
    since = serializers.DateTimeField(allow_null=True)


class CompletedCycleSerializer(serializers.Serializer):
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField()
    term = serializers.IntegerField(allow_null=True)


class DispatcherHealthSerializer(serializers.Serializer):
    """Only documents jobs.dispatcher_health.Health.as_json()."""

    healthy = serializers.BooleanField(help_text="false: jobs are not being released")
    cause = serializers.ChoiceField(
        choices=["", "no_leader", "failing", "stalled"],
        help_text="no_leader: no dispatcher ever took a term; failing: its last cycles failed; stalled: no cycle "
        "completed for stall_after_seconds",
    )
    message = serializers.CharField(help_text='"Jobs are not being released: ..."; empty when healthy')
    failures = serializers.IntegerField(help_text="cycles failed in a row since the last completed one")
    failing_since = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_null=True, help_text="the last failure's first line, for staff only")
    leader = RecordedLeaderSerializer(help_text="as the fence records it (the election backend is not asked)")
    last_cycle = CompletedCycleSerializer(allow_null=True, help_text="the last completed cycle")
    stall_after_seconds = serializers.FloatField(help_text="3 ticks + 10 s")


class StatusSerializer(serializers.Serializer):
    """Only documents the response (the view builds it from jobs.cluster_selectors)."""

    leader = LeaderSerializer()
    last_cycle = LastCycleSerializer(allow_null=True)
    dispatcher = DispatcherHealthSerializer()
    tick_seconds = serializers.FloatField()
    policy = serializers.CharField()
    jobs = serializers.DictField(child=serializers.IntegerField(), help_text="state -> number of jobs")


@extend_schema(responses={200: StatusSerializer})
@api_view(["GET"])
def status_view(request):
    """The leader (term, since, alive; its host and process for staff only), the last cycle,
    whether the dispatcher is releasing jobs (its last error for staff only), and job
    counts per state of the namespaces the caller may see."""
    staff = sees_all_namespaces(request.user)
    return Response(
        {
            "leader": cluster_selectors.leader(reveal_identity=staff),
            "last_cycle": cluster_selectors.last_cycle(),
            "dispatcher": dispatcher_health(reveal=staff).as_json(),
            "tick_seconds": settings.JOBDASH_TICK_SECONDS,
            "policy": settings.JOBDASH_POLICY,
            "jobs": job_counts_by_state(request.user),
        }
    )
