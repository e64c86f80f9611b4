"""GET /api/v1/cluster/ (staff): the data of the cluster page, from the same selector."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
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
    gpu = AmountSerializer(
        help_text="whole GPUs (nvidia.com/gpu); a node sharing its cards: its cards with nothing on them (HAMi), none (gpushare)"
    )
    pods = AmountSerializer()


class CardPodSerializer(serializers.Serializer):
    pod = serializers.CharField(help_text="namespace/name")
    job = serializers.CharField(
        help_text="namespace/name of jobdash's job the pod belongs to; blank: none of jobdash's"
    )
    memory = serializers.IntegerField(help_text="MiB of the card it takes")
    bound = serializers.BooleanField(help_text="false: pinned to the card, not bound by the scheduler yet")


class CardSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="the card's index on its node (GPU 0, GPU 1...)")
    id = serializers.CharField(help_text="as pods' annotations name it: the index (gpushare) or the GPU's UUID (HAMi)")
    model = serializers.CharField(help_text="the device model sharing it: gpushare, hami or a site's")
    memory = serializers.IntegerField(help_text="MiB in all")
    used = serializers.IntegerField(
        help_text="MiB taken, pods on their way included (may pass memory if over-committed)"
    )
    free = serializers.IntegerField(help_text="MiB free")
    pods = CardPodSerializer(many=True, help_text="the pods that name this card")


class SliceSerializer(AmountSerializer):
    resource = serializers.CharField(help_text="nvidia.com/mig-<profile> or nvidia.com/gpu.shared")
    kind = serializers.ChoiceField(choices=["MIG", "time-slicing"])


class NodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    cluster = serializers.CharField(help_text="the cluster it is in (several clusters); blank: the one cluster")
    unschedulable = serializers.BooleanField()
    failed = serializers.BooleanField(help_text="not ready or unreachable: its pods are placed again elsewhere")
    lent = serializers.CharField(
        help_text='how it is lent to training, e.g. "lent (night-a) until 08:00"; blank: it is not'
    )
    labels = serializers.DictField(child=serializers.CharField())
    domain = serializers.CharField(help_text="its domain at each topology level above the node, widest first")
    resources = NodeResourcesSerializer(help_text=AMOUNTS)
    jobs = serializers.DictField(
        child=serializers.IntegerField(), help_text="GPUs held there by each of jobdash's jobs (namespace/name)"
    )
    sharing = serializers.CharField(
        help_text="the model its cards are shared by memory with (gpushare, hami); blank: none"
    )
    cards = CardSerializer(
        many=True, help_text="its cards, when shared by memory; resources.gpu then counts whole cards"
    )
    slices = SliceSerializer(many=True, help_text="its MIG slices per profile and time-sliced replicas")
    replicas = serializers.IntegerField(allow_null=True, help_text="pods sharing each time-sliced card (its label)")


class DomainSerializer(serializers.Serializer):
    domain = serializers.CharField()
    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField(help_text="GPUs of its nodes in all")
    free = serializers.IntegerField(help_text="GPUs free on its schedulable, ready nodes")
    empty = serializers.IntegerField(help_text="its nodes with every GPU free (room for a whole-node pod)")


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


class PreemptionCountsSerializer(serializers.Serializer):
    preemptions = serializers.IntegerField(help_text="preemptions of its jobs, in all time (sum of job.preemptions)")
    borrowing = serializers.IntegerField(help_text="released or running jobs admitted beyond the guarantee, now")
    grace = serializers.IntegerField(help_text="released or running jobs being preempted (in their grace period), now")


class ElasticNamespaceSerializer(PreemptionCountsSerializer):
    name = serializers.CharField()
    cohort = serializers.CharField(help_text="blank: the cluster-wide cohort")
    guaranteed = serializers.DictField(child=serializers.CharField(), help_text="guaranteed share per quota key")


class ElasticSerializer(serializers.Serializer):
    namespaces = ElasticNamespaceSerializer(
        many=True, help_text="namespaces that are elastic or whose jobs were preempted, by cohort"
    )
    totals = PreemptionCountsSerializer()


class ClusterEntrySerializer(serializers.Serializer):
    name = serializers.CharField()
    health = serializers.ChoiceField(
        choices=["Answering", "Lost", "Returning"], help_text="whether its API server answers"
    )
    answered_at = serializers.DateTimeField(allow_null=True, help_text="its API server's last answer")
    lost_at = serializers.DateTimeField(allow_null=True, help_text="when it was marked lost; null: it is not")
    cordoned = serializers.BooleanField(help_text="an admin sends nothing new there")
    labels = serializers.DictField(child=serializers.CharField(), help_text="jobs select clusters by them")
    nodes = serializers.IntegerField(help_text="its nodes, as the last cycle saw them")
    gpus = serializers.IntegerField(help_text="GPUs of its nodes in all")
    free = serializers.IntegerField(help_text="GPUs free on its schedulable, ready nodes")


class ClusterSerializer(serializers.Serializer):
    updated_at = serializers.DateTimeField(allow_null=True, help_text="when the last cycle published what it saw")
    clusters = ClusterEntrySerializer(
        many=True, help_text="several clusters (JOBDASH_CLUSTERS): each one's health, nodes and GPUs; [] with one"
    )
    cluster = serializers.CharField(help_text="?cluster=: the nodes (and all read from them) are that cluster's alone")
    nodes = NodeSerializer(many=True)
    totals = NodeResourcesSerializer(help_text=AMOUNTS)
    gpu_fit = GpuFitSerializer(many=True)
    domains = DomainSerializer(many=True, help_text="per domain of the topology level above the node (a rack)")
    leader = LeaderSerializer()
    cycles = CycleSerializer(many=True, help_text="the most recent first")
    elastic = ElasticSerializer(help_text="elastic quota: guarantees, borrowing and preemption per namespace")


@extend_schema(
    responses={200: ClusterSerializer},
    description="Nodes, GPU fragmentation, leader, recent cycles and elastic quota's preemptions (staff); with "
    "several clusters, each cluster's health, nodes and GPUs, and ?cluster=<name> for one cluster's nodes alone.",
    parameters=[
        OpenApiParameter("cluster", str, description="one cluster's nodes alone (a name no node has: none)"),
    ],
)
@api_view(["GET"])
@permission_classes([permissions.IsAuthenticated, IsStaff])
def cluster_view(request):
    cluster = request.query_params.get("cluster", "").strip()
    return Response(ClusterSerializer(cluster_overview(cluster=cluster)).data)
