"""Just enough of Kubernetes' protobuf encoding to read what kubectl sends that way.

kubectl's typed clients send built-in objects as ``application/vnd.kubernetes.protobuf``
(``kubectl auth can-i`` posts a SelfSubjectAccessReview so): the ``k8s\\0`` magic, then a
runtime.Unknown whose ``raw`` is the object's message. kubesim decodes the
SelfSubjectAccessReview (field numbers of k8s.io/api/authorization/v1/generated.proto)
and answers in JSON, which the client accepts too; other protobuf bodies get a 415.
"""

from __future__ import annotations

from .errors import ApiError

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7


def fields(data: bytes) -> dict[int, list]:
    """A message's fields by number: ints for varints, bytes for length-delimited ones."""
    found: dict[int, list] = {}
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            length, i = _varint(data, i)
            value, i = data[i : i + length], i + length
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        found.setdefault(number, []).append(value)
    return found


def _strings(message: bytes, names: dict[int, str]) -> dict:
    decoded = fields(message)
    return {name: decoded[n][-1].decode() for n, name in names.items() if n in decoded}


_RESOURCE = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource", 7: "name"}
_NON_RESOURCE = {1: "path", 2: "verb"}


def decode_review(raw: bytes) -> dict:
    """A protobuf SelfSubjectAccessReview as its JSON form (spec only)."""
    if not raw.startswith(MAGIC):
        raise ApiError(400, "BadRequest", "protobuf body without the k8s magic prefix")
    try:
        unknown = fields(raw[len(MAGIC) :])
        type_meta = _strings(unknown.get(1, [b""])[-1], {1: "apiVersion", 2: "kind"})
        if type_meta.get("kind") != "SelfSubjectAccessReview":
            raise unsupported()
        review = fields(unknown.get(2, [b""])[-1])
        spec = fields(review.get(2, [b""])[-1])
        body: dict = {**type_meta, "spec": {}}
        if 1 in spec:
            body["spec"]["resourceAttributes"] = _strings(spec[1][-1], _RESOURCE)
        if 2 in spec:
            body["spec"]["nonResourceAttributes"] = _strings(spec[2][-1], _NON_RESOURCE)
        return body
    except (ValueError, UnicodeDecodeError, IndexError) as exc:
        raise ApiError(400, "BadRequest", f"the protobuf body could not be decoded: {exc}") from None


def unsupported() -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"kubesim reads {PROTOBUF} only for SelfSubjectAccessReview; send application/json",
    )
