"""Thin: parse the request, call one service or selector, render."""

import django_filters
from django.db.models import Prefetch
from django.utils.functional import SimpleLazyObject
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from queueing.workload import ADAPTERS

from .. import estimates, selectors, services, workflows
from ..dispatcher_health import dispatcher_health
from ..exceptions import FieldProblem, InvalidInput
from ..models import JobDependency, JobEvent, Source, State
from .parsers import LimitedJSONParser, RawYAMLParser, TextYAMLParser, XYAMLParser
from .schema import CONFLICT, SUBMIT, UNAVAILABLE
from .serializers import (
    CheckpointSerializer,
    ElasticQuotaSerializer,
    JobDetailSerializer,
    JobSerializer,
    JobSubmitSerializer,
    NamespaceSerializer,
    PriorityClassSerializer,
    ReasonSerializer,
)
from .submissions import body_submissions
from .workflows import submit_workflow


class JobFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(help_text="the job's name, exactly")
    # The dashboard's name filter: part of the name, any case.
    name_contains = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    namespace = django_filters.CharFilter(field_name="namespace__name")
    state = django_filters.ChoiceFilter(choices=State.choices)
    # The kinds registered when the filter is built: queueing registers every adapter on import.
    kind = django_filters.ChoiceFilter(choices=[(k, k) for k in sorted({a.kind for a in ADAPTERS.values()})])
    # ?mine=true: the caller's own jobs, wherever they were submitted (kubectl included)
    # (a choice, not a BooleanFilter: that one reads a word it does not know as "no filter")
    mine = django_filters.ChoiceFilter(
        choices=[("true", "true"), ("false", "false")], method="filter_mine", label="only the caller's own jobs"
    )

    def filter_mine(self, queryset, name, value):
        return queryset.filter(submitted_by=self.request.user) if value == "true" else queryset


EXAMPLE_MANIFEST = """apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: mnist
  namespace: team-a
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.15.0
              resources:
                requests: {cpu: "1", memory: 2Gi}
"""
SUBMIT_DESCRIPTION = """Submit a job: a JSON object (`manifest`, `priority_class`, ...) or a YAML body.

Several jobs at once: a JSON list of such objects, or a YAML body of several documents separated by
`---` (the query parameters apply to each). They are checked all or nothing and stored in one
transaction, in order; the answer is the list of the jobs. Problems name the document first,
`[3].spec.pytorchReplicaSpecs.Worker.replicas`. At most JOBDASH_BULK_MAX_JOBS jobs (1000 by default)
per request, within the size limit of a request (413 above either)."""
JOB_ID = OpenApiParameter("id", int, OpenApiParameter.PATH, description="The job's id.")


class KnownParameters:
    """A list endpoint refuses query parameters it does not know (400 naming them): a
    misspelt filter (?nmae=x, ?stat=Queued) must not quietly return every job."""

    list_parameters: tuple[str, ...] = ("page", "page_size", "format")

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if getattr(self, "action", None) == "list":
            known = set(self.list_parameters)
            unknown = sorted(set(request.query_params) - known)
            if unknown:
                message = f"unknown parameter; known: {', '.join(sorted(known))}"
                raise InvalidInput([FieldProblem(name, message) for name in unknown])


@extend_schema_view(
    retrieve=extend_schema(parameters=[JOB_ID]),
    cancel=extend_schema(parameters=[JOB_ID]),
    priority_class=extend_schema(parameters=[JOB_ID]),
    requeue=extend_schema(parameters=[JOB_ID]),
    checkpoints=extend_schema(parameters=[JOB_ID]),
)
class JobViewSet(KnownParameters, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = JobSerializer
    filterset_class = JobFilter
    list_parameters = ("page", "page_size", "format", *JobFilter.base_filters)
    parser_classes = [LimitedJSONParser, RawYAMLParser, TextYAMLParser, XYAMLParser]
    # Digits only, and few enough to fit a bigint: anything else is a 404, not a 500.
    lookup_value_regex = r"\d{1,18}"

    def get_queryset(self):
        dependencies = Prefetch(
            "dependencies",
            queryset=JobDependency.objects.select_related("on").only("job", "condition", "on__name", "on__state"),
        )
        jobs = selectors.jobs_visible_to(self.request.user).prefetch_related(dependencies)
        if self.action == "retrieve":
            return jobs.prefetch_related(Prefetch("events", queryset=JobEvent.objects.order_by("created_at", "id")))
        return jobs

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    def get_serializer_context(self):
        """The dispatcher's health for the jobs read (a waiting job's reason says when it is not
        cycling); read once per request, and only if a serializer asks."""
        context = dict(super().get_serializer_context())
        if self.action in ("list", "retrieve"):
            staff = selectors.sees_all_namespaces(self.request.user)
            context["dispatcher"] = SimpleLazyObject(lambda: dispatcher_health(reveal=staff))
        return context

    @extend_schema(
        description=SUBMIT_DESCRIPTION,
        request={
            "application/json": PolymorphicProxySerializer(
                "JobSubmitOneOrMany",
                serializers=[JobSubmitSerializer, JobSubmitSerializer(many=True)],
                resource_type_field_name=None,
                many=False,
            ),
            "application/yaml": {"type": "string", "description": "a manifest, or several separated by ---"},
        },
        parameters=[
            OpenApiParameter("priority", int, description="with a YAML body; staff only"),
            OpenApiParameter("priority_class", str, description="with a YAML body: a PriorityClass in the cluster"),
            OpenApiParameter("namespace", str, description="with a YAML body, when the manifest has none"),
        ],
        responses={
            201: OpenApiResponse(
                PolymorphicProxySerializer(
                    "JobOrJobs",
                    serializers=[JobSerializer, JobSerializer(many=True)],
                    resource_type_field_name=None,
                    many=False,
                ),
                "The job; for a JSON list or a YAML stream of several documents, the list of the jobs, in order.",
            ),
            **SUBMIT,
        },
        examples=[
            OpenApiExample(
                "a two-worker TFJob",
                value={"manifest": EXAMPLE_MANIFEST, "priority_class": "normal"},
                request_only=True,
                media_type="application/json",
            ),
            OpenApiExample(
                "two jobs at once",
                value=[{"manifest": EXAMPLE_MANIFEST}, {"manifest": EXAMPLE_MANIFEST.replace("mnist", "mnist-2")}],
                request_only=True,
                media_type="application/json",
            ),
        ],
    )
    def create(self, request):
        submissions, many = body_submissions(request)
        array = _array_spec(request)
        if array is not None or (many and workflows.header(submissions[0].manifest) is not None):
            if array is not None and many:
                raise InvalidInput.at("array", "an array is one manifest: send one document")
            _, jobs = submit_workflow(request.user, submissions, array)
            return Response(JobSerializer(jobs, many=True).data, status=status.HTTP_201_CREATED)
        if not many:
            one = submissions[0]
            job = services.job_submit(
                user=request.user,
                source=Source.API,
                manifest=one.manifest,
                priority=one.priority,
                priority_class=one.priority_class,
                namespace=one.namespace,
                options=one.options,
            )
            return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)
        jobs = services.jobs_submit_many(user=request.user, submissions=submissions, source=Source.API)
        return Response(JobSerializer(jobs, many=True).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: JobSerializer, **CONFLICT})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = services.job_cancel(job_id=int(pk), user=request.user)
        return Response(JobSerializer(job).data)

    @extend_schema(request=PriorityClassSerializer, responses={200: JobSerializer, **CONFLICT, **UNAVAILABLE})
    @action(detail=True, methods=["post"], url_path="priority_class", parser_classes=[LimitedJSONParser])
    def priority_class(self, request, pk=None):
        """A Queued job's PriorityClass, and with it its priority: members up to their namespace's limit."""
        body = PriorityClassSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = services.job_set_priority_class(
            job_id=int(pk), user=request.user, priority_class=body.validated_data["priority_class"]
        )
        return Response(JobSerializer(job).data)

    @extend_schema(request=ReasonSerializer, responses={200: JobSerializer, **CONFLICT})
    @action(detail=True, methods=["post"], parser_classes=[LimitedJSONParser])
    def requeue(self, request, pk=None):
        """Staff only: a Released or Running job goes back to the queue (its object is taken back)."""
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = services.job_requeue(job_id=int(pk), user=request.user, reason=body.validated_data["reason"])
        return Response(JobSerializer(job).data)

    @extend_schema(request=CheckpointSerializer, responses={200: JobSerializer, **CONFLICT})
    @action(detail=True, methods=["post"], parser_classes=[LimitedJSONParser])
    def checkpoints(self, request, pk=None):
        """A Running job wrote a checkpoint (at `at`, default now): its count goes up and its last
        checkpoint's time is kept (never moved back). Its submitter or the namespace's admin."""
        body = CheckpointSerializer(data=request.data if request.data else {})
        body.is_valid(raise_exception=True)
        job = services.job_checkpointed(job_id=int(pk), user=request.user, at=body.validated_data.get("at"))
        return Response(JobSerializer(job).data)


def _array_spec(request) -> str | None:
    if isinstance(request.data, bytes):
        return request.query_params.get("array") or None
    if isinstance(request.data, dict) and request.data.get("array") is not None:
        return str(request.data["array"])
    return None


NAMESPACE_NAME = OpenApiParameter(
    "name",
    str,
    OpenApiParameter.PATH,
    description="The namespace.",
    pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    examples=[OpenApiExample("a namespace", value="team-a")],
)


@extend_schema_view(retrieve=extend_schema(parameters=[NAMESPACE_NAME]))
class NamespaceViewSet(KnownParameters, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = NamespaceSerializer
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    parser_classes = [LimitedJSONParser]

    def get_queryset(self):
        return selectors.namespace_summaries(self.request.user)

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "cluster_quotas": selectors.cluster_quotas()}

    def list(self, request, *args, **kwargs):
        """The namespaces you may see: queue counts, quota, and the track record of their start estimates."""
        # One query for the track records of the whole page (the serializer would ask per namespace).
        namespaces = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(namespaces)
        shown = list(namespaces) if page is None else page
        context = {**self.get_serializer_context(), "estimate_records": estimates.estimate_records(shown)}
        data = NamespaceSerializer(shown, many=True, context=context).data
        return Response(data) if page is None else self.get_paginated_response(data)

    @extend_schema(
        request=ElasticQuotaSerializer,
        responses={200: NamespaceSerializer},
        parameters=[NAMESPACE_NAME],
        examples=[
            OpenApiExample(
                "16 GPUs guaranteed in cohort research, at most 8 more borrowed",
                value={
                    "guaranteed": {"requests.nvidia.com/gpu": "16"},
                    "cohort": "research",
                    "borrowing_limit": {"requests.nvidia.com/gpu": "8"},
                },
                request_only=True,
            )
        ],
    )
    def partial_update(self, request, name=None):
        """Staff only: the namespace's elastic quota (guaranteed share, cohort, borrowing limit).
        Each refusal is a 400 naming the field and the numbers; nothing is written then."""
        body = ElasticQuotaSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.set_elastic_quota(name, user=request.user, **body.validated_data)
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(responses={200: JobSerializer(many=True)}, parameters=[NAMESPACE_NAME])
    @action(detail=True, methods=["get"])
    def queue(self, request, name=None):
        """Pending jobs of the namespace in admission order: position 1 is released next."""
        jobs = selectors.queue_of(request.user, name)
        page = self.paginate_queryset(jobs)
        return self.get_paginated_response(JobSerializer(page, many=True).data)
