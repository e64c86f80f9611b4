"""Workflows in the API (issue 36): list, describe, submit and cancel."""

from collections import Counter
from collections.abc import Sequence
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from .. import selectors, services, workflows
from ..exceptions import InvalidInput
from ..models import Job, Source, Workflow
from .parsers import LimitedJSONParser, RawYAMLParser, TextYAMLParser, XYAMLParser
from .schema import CONFLICT, SUBMIT
from .submissions import body_submissions, submissions_of


def submit_workflow(user, submissions: Sequence[services.Submission], array: str | None) -> tuple[Workflow, list[Job]]:
    """An array of one submission, or the workflow a stream's first document declares."""
    if array is not None:
        return workflows.array_submit(user=user, submission=submissions[0], spec=array, source=Source.API)
    found = workflows.header(submissions[0].manifest)
    assert found is not None
    name, concurrency = found
    jobs = list(submissions[1:])
    if not jobs:
        raise InvalidInput.at("", workflows.NO_JOBS)
    return workflows.workflow_submit(
        user=user, name=name, submissions=jobs, source=Source.API, concurrency=concurrency, first_document=1
    )


class WorkflowSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name")
    submitted_by = serializers.CharField(source="submitted_by_name")
    kind = serializers.CharField(read_only=True, help_text='"dag" (a graph of dependencies) or "array".')
    progress = serializers.SerializerMethodField(help_text="Its jobs by state, e.g. {'Succeeded': 2, 'Queued': 1}.")

    class Meta:
        model = Workflow
        fields = ["id", "namespace", "name", "kind", "array", "concurrency", "submitted_by", "created_at"]
        fields += ["cancelled_at", "progress"]

    def get_progress(self, workflow: Workflow) -> dict[str, int]:
        return dict(Counter(job.state for job in workflow.jobs.all()))


class WorkflowDetailSerializer(WorkflowSerializer):
    jobs = serializers.SerializerMethodField(help_text="Its jobs, with their edges (what each waits for).")

    class Meta(WorkflowSerializer.Meta):
        fields = [*WorkflowSerializer.Meta.fields, "jobs"]

    def get_jobs(self, workflow: Workflow) -> list[dict[str, Any]]:
        return [
            {
                "id": job.pk,
                "name": job.name,
                "state": job.state,
                "reason": job.reason,
                "array_index": job.array_index,
                "retries": job.retries,
                "after": [{"job": d.on_id, "condition": d.condition} for d in job.dependencies.all()],
            }
            for job in selectors.workflow_jobs(workflow)
        ]


class WorkflowCreateSerializer(serializers.Serializer):
    name = serializers.RegexField(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    concurrency = serializers.IntegerField(required=False, min_value=1, allow_null=True)
    jobs = serializers.ListField(child=serializers.DictField(), min_length=1)


class WorkflowViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Jobs submitted as one graph or one array."""

    parser_classes = [LimitedJSONParser, RawYAMLParser, TextYAMLParser, XYAMLParser]
    lookup_value_regex = r"\d{1,18}"

    def get_queryset(self):
        workflows = selectors.workflows_visible_to(self.request.user).prefetch_related("jobs")
        namespace = self.request.query_params.get("namespace")
        return workflows.filter(namespace__name=namespace) if namespace else workflows

    def get_serializer_class(self):
        return WorkflowDetailSerializer if self.action == "retrieve" else WorkflowSerializer

    @extend_schema(
        request={"application/json": WorkflowCreateSerializer, "application/yaml": {"type": "string"}},
        responses={201: WorkflowDetailSerializer, **SUBMIT},
        parameters=[OpenApiParameter("namespace", str, description="with a YAML body, when the manifests have none")],
    )
    def create(self, request):
        """A YAML stream whose first document is a jobdash.io/v1 Workflow, or JSON {name, jobs, concurrency}."""
        if isinstance(request.data, bytes):
            submissions, _ = body_submissions(request)
            if workflows.header(submissions[0].manifest) is None:
                raise InvalidInput.at("[0]", "the first document must be an apiVersion jobdash.io/v1 kind Workflow")
            workflow, _ = submit_workflow(request.user, submissions, None)
        else:
            body = WorkflowCreateSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            data = body.validated_data
            workflow, _ = workflows.workflow_submit(
                user=request.user,
                name=data["name"],
                submissions=submissions_of(data["jobs"]),
                source=Source.API,
                concurrency=data.get("concurrency"),
            )
        return Response(WorkflowDetailSerializer(workflow).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: WorkflowDetailSerializer, **CONFLICT})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Every active job of the workflow is cancelled."""
        workflow = workflows.workflow_cancel(workflow_id=int(pk), user=request.user)
        return Response(WorkflowDetailSerializer(workflow).data)
