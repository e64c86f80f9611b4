"""OpenAPI generation (drf-spectacular) that documents what the API really answers: every
operation's error responses in the one error shape (api/errors.py), so a client, and
schemathesis in tests/jobdash/test_api_schema.py, can rely on the status codes."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class ErrorItemSerializer(serializers.Serializer):
    path = serializers.CharField(
        help_text='The field at fault, e.g. "spec.tfReplicaSpecs.Worker.replicas"; "" for the request as a whole.'
    )
    message = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    # Named like Serializer.errors: this serializer only documents the error shape for
    # OpenAPI and never validates anything.
    errors = ErrorItemSerializer(many=True)  # type: ignore[assignment]


# Every operation: bad query parameters or filters, no or bad credentials, not allowed
# (not a member, not staff), not found (also an out-of-range page).
COMMON = {
    400: "Invalid input: each problem names its field.",
    401: "No or invalid credentials.",
    403: "Not allowed: not a member of the namespace, or staff only.",
    404: "Not found, or not visible to you; also a page number out of range.",
}
# Writes add these where they apply (views declare them with extend_schema responses).
CONFLICT = {
    409: OpenApiResponse(
        ErrorSerializer, "An active job of that name exists, or the job is not in a state that allows this."
    )
}
UNAVAILABLE = {
    503: OpenApiResponse(
        ErrorSerializer,
        "The cluster could not be asked about something the job refers to (a TrainJob's runtime, "
        "a priority class): try again.",
    )
}
SUBMIT = {
    **CONFLICT,
    **UNAVAILABLE,
    413: OpenApiResponse(ErrorSerializer, "The manifest or the request body is too large."),
    415: OpenApiResponse(ErrorSerializer, "Unsupported media type: send application/json or application/yaml."),
}


class JobdashAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code, description in COMMON.items():
            responses.setdefault(
                str(code), self._get_response_for_code(OpenApiResponse(ErrorSerializer, description), str(code))
            )
        return responses
