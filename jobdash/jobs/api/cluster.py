"""GET /api/v1/cluster/ (staff): the data of the cluster page, from the same selector."""

from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from ..cluster_selectors import cluster_overview
from ..selectors import sees_all_namespaces

AMOUNTS = "Canonical integers: cpu in millicores, memory in bytes, gpu (nvidia.com/gpu) and pods as counts."


class IsStaff(permissions.BasePermission):
    message = "the cluster overview is for staff"

    def has_permission(self, request, view) -> bool:
        return sees_all_namespaces(request.user)


class AmountSerializer(serializers.Serializer):
    allocatable = serializers.IntegerField()
    allocated = serializers.IntegerField()
    free = serializers.IntegerField()


class NodeResourcesSerializer(serializers.Serializer):
    cpu = AmountSerializer()
    memory = AmountSerializer()
    gpu = AmountSerializer(help_text="nvidia.com/gpu")
    pods = AmountSerializer()


class NodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    unschedulable = serializers.BooleanField()
    labels = serializers.DictField(child=serializers.CharField())
    resources = NodeResourcesSerializer(help_text=AMOUNTS)


class GpuFitSerializer(serializers.Serializer):
    gpus = serializers.IntegerField(help_text="GPUs per pod")
    nodes = serializers.IntegerField(help_text="schedulable nodes with that many GPUs free now")
    pods = serializers.IntegerField(help_text="pods of that size that fit on all nodes together")


class LeaderSerializer(serializers.Serializer):
    backend = serializers.CharField()
    identity = serializers.CharField(allow_null=True)
    term = serializers.IntegerField(allow_null=True)
    since = serializers.DateTimeField(allow_null=True)
    alive = serializers.BooleanField(allow_null=True)


class CycleSerializer(serializers.Serializer):
    started_at = serializers.DateTimeField()
    duration_ms = serializers.FloatField()
    policy = serializers.CharField()
    pending = serializers.IntegerField()
    admitted = serializers.IntegerField()
    released = serializers.IntegerField()
    term = serializers.IntegerField(allow_null=True)


class ClusterSerializer(serializers.Serializer):
    updated_at = serializers.DateTimeField(allow_null=True, help_text="when the last cycle published what it saw")
    nodes = NodeSerializer(many=True)
    totals = NodeResourcesSerializer(help_text=AMOUNTS)
    gpu_fit = GpuFitSerializer(many=True)
    leader = LeaderSerializer()
    cycles = CycleSerializer(many=True, help_text="the most recent first")


@extend_schema(
    responses={200: ClusterSerializer}, description="Nodes, GPU fragmentation, leader and recent cycles (staff)."
)
@api_view(["GET"])
@permission_classes([permissions.IsAuthenticated, IsStaff])
def cluster_view(request):
    return Response(ClusterSerializer(cluster_overview()).data)
