"""Body parsers that stop reading at a size limit, so a 10 MB body costs 256 KiB of memory."""

import json

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.parsers import BaseParser

from ..storable import tree_problem

# Room for the JSON envelope and escaping around the manifest.
JSON_ENVELOPE_BYTES = 64 * 1024


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


def read_limited(stream, limit: int) -> bytes:
    if stream is None:
        return b""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(f"request body is larger than {limit} bytes")
    return data


class RawYAMLParser(BaseParser):
    """Returns the body untouched: the manifest is stored exactly as written and parsed
    by queueing.safe_yaml, which knows the limits for untrusted YAML."""

    media_type = "application/yaml"

    # The raw body is the data on purpose (DRF hands parse()'s result on as request.data).
    def parse(self, stream, media_type=None, parser_context=None) -> bytes:  # type: ignore[override]
        return read_limited(stream, settings.JOBDASH_MAX_MANIFEST_BYTES)


class TextYAMLParser(RawYAMLParser):
    media_type = "text/yaml"


class XYAMLParser(RawYAMLParser):
    media_type = "application/x-yaml"


class LimitedJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        data = read_limited(stream, settings.JOBDASH_MAX_MANIFEST_BYTES + JSON_ENVELOPE_BYTES)
        try:
            document = json.loads(data.decode("utf-8"))
        except RecursionError:
            raise ParseError("JSON parse error: nested too deeply") from None
        except ValueError as error:  # not UTF-8, not JSON, or an integer of thousands of digits
            raise ParseError(f"JSON parse error: {error}") from None
        found = tree_problem(document)
        if found is not None:
            raise ValidationError({found[0]: [found[1]]})
        return document
