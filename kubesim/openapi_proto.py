"""``/openapi/v2`` in protobuf: the Swagger document as gnostic's ``openapi.v2.Document``.

client-go asks for ``/openapi/v2`` in protobuf only. kubectl reads it to validate on the
client what the server will not validate itself: a ``List`` (``kubectl get -o yaml`` output
fed back to ``apply``), and a kind whose group-version the server does not serve (``create -f
deployment.yaml``), which it finds missing from the definitions, skips, and then reports as
kube-apiserver's clients do: ``no matches for kind "Deployment" in version "apps/v1"``. A 406
there stopped both with "the server was unable to respond with a content type".

Field numbers are those of gnostic's openapiv2/OpenAPIv2.proto. What that message cannot say
(``anyOf``, ``nullable``) is left out, as gnostic does: the schema is then arbitrary there.
Values of ``default``, ``enum`` and ``x-*`` extensions go as ``Any.yaml`` (JSON is YAML).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from functools import cache

from . import openapi

# What client-go asks for; "@" is no valid media type character, so the reply is labelled
# with the name kube-openapi gives it now (a reply typed "...@..." fails to parse).
MEDIA = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
REPLY_MEDIA = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # negatives as two's complement, as protobuf's int64
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _bytes(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _string(number: int, text: str) -> bytes:
    return _bytes(number, text.encode()) if text else b""


def _strings(number: int, texts: Iterable[str]) -> bytes:
    return b"".join(_bytes(number, str(text).encode()) for text in texts)


def _bool(number: int, value: object) -> bytes:
    return _varint(number << 3) + b"\x01" if value is True else b""


def _int(number: int, value: object) -> bytes:
    return _varint(number << 3) + _varint(int(value)) if isinstance(value, int) and value else b""


def _double(number: int, value: object) -> bytes:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return b""
    return _varint(number << 3 | 1) + struct.pack("<d", float(value))


def _any(number: int, value: object) -> bytes:
    return _bytes(number, _string(2, json.dumps(value)))  # openapi.v2.Any{yaml}


def _named(number: int, name: str, value: bytes) -> bytes:
    return _bytes(number, _string(1, name) + _bytes(2, value))


def _extensions(number: int, node: dict) -> bytes:
    return b"".join(
        _named(number, key, _string(2, json.dumps(value))) for key, value in node.items() if key.startswith("x-")
    )


# Schema's scalar fields: JSON key -> (field number, encoder).
_SCHEMA_SCALARS = {
    "$ref": (1, _string),
    "format": (2, _string),
    "title": (3, _string),
    "description": (4, _string),
    "multipleOf": (6, _double),
    "maximum": (7, _double),
    "exclusiveMaximum": (8, _bool),
    "minimum": (9, _double),
    "exclusiveMinimum": (10, _bool),
    "maxLength": (11, _int),
    "minLength": (12, _int),
    "pattern": (13, _string),
    "maxItems": (14, _int),
    "minItems": (15, _int),
    "uniqueItems": (16, _bool),
    "maxProperties": (17, _int),
    "minProperties": (18, _int),
    "discriminator": (26, _string),
    "readOnly": (27, _bool),
}


def schema(node: dict) -> bytes:
    """One JSON schema as an openapi.v2.Schema."""
    out = [encode(number, node[key]) for key, (number, encode) in _SCHEMA_SCALARS.items() if key in node]
    if "default" in node:
        out.append(_any(5, node["default"]))
    out.append(_strings(19, node.get("required") or ()))
    out += [_any(20, value) for value in node.get("enum") or ()]
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out.append(_bytes(21, _bytes(1, schema(extra))))
    elif isinstance(extra, bool):
        out.append(_bytes(21, _varint(2 << 3) + (b"\x01" if extra else b"\x00")))
    kind = node.get("type")
    if kind is not None:
        out.append(_bytes(22, _strings(1, kind if isinstance(kind, list) else [kind])))
    items = node.get("items")
    if items is not None:
        out.append(_bytes(23, b"".join(_bytes(1, schema(i)) for i in (items if isinstance(items, list) else [items]))))
    out += [_bytes(24, schema(part)) for part in node.get("allOf") or ()]
    if isinstance(node.get("properties"), dict):
        out.append(_bytes(25, b"".join(_named(1, k, schema(v)) for k, v in node["properties"].items())))
    if "example" in node:
        out.append(_any(30, node["example"]))
    out.append(_extensions(31, node))
    return b"".join(out)


def _parameter(param: dict) -> bytes:
    """A ParametersItem: a body parameter, or a query or path one."""
    if param.get("in") == "body":
        body = _string(2, param["name"]) + _string(3, "body") + _bool(4, param.get("required"))
        return _bytes(1, _bytes(1, body + _bytes(5, schema(param.get("schema") or {}))))
    sub = {"query": 3, "path": 4}.get(param.get("in", ""))
    if sub is None:
        return b""
    # QueryParameterSubSchema and PathParameterSubSchema number name, type and uniqueItems apart.
    name, kind, unique = (4, 6, 20) if sub == 3 else (4, 5, 19)
    fields = _bool(1, param.get("required")) + _string(2, param["in"]) + _string(3, param.get("description", ""))
    fields += (
        _string(name, param["name"]) + _string(kind, param.get("type", "")) + _bool(unique, param.get("uniqueItems"))
    )
    return _bytes(1, _bytes(2, _bytes(sub, fields)))


def _operation(op: dict) -> bytes:
    out = [_string(3, op.get("description", "")), _string(5, op.get("operationId", ""))]
    out += [_bytes(8, _parameter(param)) for param in op.get("parameters") or ()]
    codes = b""
    for code, response in (op.get("responses") or {}).items():
        value = _string(1, response.get("description", ""))
        if isinstance(response.get("schema"), dict):
            value += _bytes(2, _bytes(1, schema(response["schema"])))
        codes += _named(1, code, _bytes(1, value))
    out.append(_bytes(9, codes))
    out.append(_extensions(13, op))
    return b"".join(out)


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def document(doc: dict) -> bytes:
    """A Swagger 2.0 document (as JSON decodes it) as an openapi.v2.Document."""
    info = doc.get("info") or {}
    paths = b"".join(
        _named(2, path, b"".join(_bytes(_METHODS[m], _operation(op)) for m, op in item.items() if m in _METHODS))
        for path, item in (doc.get("paths") or {}).items()
    )
    definitions = b"".join(_named(1, name, schema(node)) for name, node in (doc.get("definitions") or {}).items())
    return (
        _string(1, doc.get("swagger", "2.0"))
        + _bytes(2, _string(1, info.get("title", "")) + _string(2, info.get("version", "")))
        + _bytes(8, paths)
        + _bytes(9, definitions)
    )


@cache
def v2_protobuf() -> bytes:
    """kubesim's /openapi/v2, in protobuf (built once)."""
    return document(json.loads(openapi.v2_document()))
