"""/api/v1/lent-pools/: nodes lent for the night or until a time. Everyone signed in reads
them (a job's reason names them); staff declare, change and remove them."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.response import Response

from ..lent_pools import FIELDS, delete_lent_pool, lending, save_lent_pool
from ..models import LentPool
from .parsers import LimitedJSONParser


class LendingSerializer(serializers.Serializer):
    lent_now = serializers.BooleanField()
    lent_from = serializers.DateTimeField(
        allow_null=True,
        help_text="When the current lending began (null: not lent now, or since before a pool lent until a time).",
    )
    reclaim_at = serializers.DateTimeField(allow_null=True, help_text="When the nodes go back.")
    notice_from = serializers.DateTimeField(allow_null=True, help_text="From then on nothing new starts there.")
    next_lent_from = serializers.DateTimeField(
        allow_null=True, help_text="A nightly pool not lent now: when it is next."
    )


class LentPoolSerializer(serializers.ModelSerializer):
    lending = serializers.SerializerMethodField()

    class Meta:
        model = LentPool
        fields = ["name", *FIELDS, "lending"]
        # The model's clean() checks the fields together (services): a ModelSerializer's own
        # unique check would answer before it, with another shape.
        extra_kwargs: dict = {"name": {"validators": []}}

    @extend_schema_field(LendingSerializer)
    def get_lending(self, pool: LentPool) -> dict:
        return LendingSerializer(lending(pool, timezone.now())).data


class LentPoolViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = LentPoolSerializer
    queryset = LentPool.objects.all()
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    parser_classes = [LimitedJSONParser]

    def create(self, request, *args, **kwargs):
        """Staff only: declare a pool. A refusal is a 400 naming the field; nothing is written."""
        body = self.get_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        pool = save_lent_pool(request.user, dict(body.validated_data))
        return Response(self.get_serializer(pool).data, status=201)

    def update(self, request, *args, **kwargs):
        """Staff only: change a pool (PATCH: the fields given)."""
        partial = kwargs.pop("partial", False)
        body = self.get_serializer(self.get_object(), data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        fields = {key: value for key, value in body.validated_data.items() if key != "name"}
        pool = save_lent_pool(request.user, fields, name=kwargs["name"])
        return Response(self.get_serializer(pool).data)

    def destroy(self, request, *args, **kwargs):
        """Staff only: the nodes are no longer lent (jobs on them run on)."""
        delete_lent_pool(request.user, kwargs["name"])
        return Response(status=204)
