"""Just enough of Kubernetes' protobuf encoding to read what kubectl sends that way.

kubectl's typed clients send built-in objects as ``application/vnd.kubernetes.protobuf``:
``kubectl auth can-i`` posts a SelfSubjectAccessReview so, ``kubectl create
namespace|quota|priorityclass|role|rolebinding|job`` and ``kubectl run`` their objects. The
body is the ``k8s\\0`` magic and a runtime.Unknown whose ``raw`` is the object's message.
kubesim decodes those kinds (the fields kubectl sets, and a pod spec's common ones) with the
field numbers of their generated.proto (k8s.io/api) and answers in JSON, which the client
accepts too; other protobuf bodies get a 415.
"""

from __future__ import annotations

from typing import Any

from .errors import ApiError

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
Spec = dict[int, tuple[str, Any]]  # field number -> (JSON name, type)


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


def _value(kind: Any, raw: Any) -> Any:
    if kind == "string":
        return raw.decode()
    if kind == "int":
        return raw - (1 << 64) if raw >= 1 << 63 else raw
    if kind == "bool":
        return bool(raw)
    if kind == "quantity":
        return decode(raw, {1: ("string", "string")})["string"]
    return decode(raw, kind)


def decode(message: bytes, spec: Spec) -> dict:
    """A message as its JSON form: fields the spec names (repeated as lists, maps as dicts)."""
    decoded = fields(message)
    out: dict = {}
    for number, (name, kind) in spec.items():
        if number not in decoded:
            continue
        values = decoded[number]
        if isinstance(kind, tuple) and kind[0] == "repeated":
            out[name] = [_value(kind[1], v) for v in values]
        elif isinstance(kind, tuple) and kind[0] == "map":
            entries = [fields(v) for v in values]
            out[name] = {e[1][-1].decode(): _value(kind[1], e[2][-1]) if 2 in e else "" for e in entries}
        else:
            out[name] = _value(kind, values[-1])
        if out[name] is False or out[name] in ("", [], {}):  # Go writes them all; JSON omits the empty ones
            del out[name]
    return out


def _strings(*names: str) -> Spec:
    return {i: (name, "string") for i, name in enumerate(names, 1)}


OBJECT_META: Spec = {
    **_strings("name", "generateName", "namespace"),
    11: ("labels", ("map", "string")),
    12: ("annotations", ("map", "string")),
    14: ("finalizers", ("repeated", "string")),
}
POLICY_RULE: Spec = {
    1: ("verbs", ("repeated", "string")),
    2: ("apiGroups", ("repeated", "string")),
    3: ("resources", ("repeated", "string")),
    4: ("resourceNames", ("repeated", "string")),
    5: ("nonResourceURLs", ("repeated", "string")),
}
BINDING: Spec = {
    1: ("metadata", OBJECT_META),
    2: ("subjects", ("repeated", _strings("kind", "apiGroup", "name", "namespace"))),
    3: ("roleRef", _strings("apiGroup", "kind", "name")),
}
QUANTITIES = ("map", "quantity")
CONTAINER: Spec = {
    **_strings("name", "image"),
    3: ("command", ("repeated", "string")),
    4: ("args", ("repeated", "string")),
    5: ("workingDir", "string"),
    6: (
        "ports",
        (
            "repeated",
            {1: ("name", "string"), 2: ("hostPort", "int"), 3: ("containerPort", "int"), 4: ("protocol", "string")},
        ),
    ),
    7: ("env", ("repeated", _strings("name", "value"))),
    8: ("resources", {1: ("limits", QUANTITIES), 2: ("requests", QUANTITIES)}),
    14: ("imagePullPolicy", "string"),
    16: ("stdin", "bool"),
    17: ("stdinOnce", "bool"),
    18: ("tty", "bool"),
}
POD_SPEC: Spec = {
    2: ("containers", ("repeated", CONTAINER)),
    20: ("initContainers", ("repeated", CONTAINER)),
    3: ("restartPolicy", "string"),
    4: ("terminationGracePeriodSeconds", "int"),
    5: ("activeDeadlineSeconds", "int"),
    6: ("dnsPolicy", "string"),
    7: ("nodeSelector", ("map", "string")),
    8: ("serviceAccountName", "string"),
    10: ("nodeName", "string"),
    19: ("schedulerName", "string"),
    22: (
        "tolerations",
        ("repeated", {**_strings("key", "operator", "value", "effect"), 5: ("tolerationSeconds", "int")}),
    ),
    24: ("priorityClassName", "string"),
    38: ("schedulingGates", ("repeated", {1: ("name", "string")})),
}
JOB_SPEC: Spec = {
    1: ("parallelism", "int"),
    2: ("completions", "int"),
    3: ("activeDeadlineSeconds", "int"),
    7: ("backoffLimit", "int"),
    6: ("template", {1: ("metadata", OBJECT_META), 2: ("spec", POD_SPEC)}),
    8: ("ttlSecondsAfterFinished", "int"),
    9: ("completionMode", "string"),
    10: ("suspend", "bool"),
}
RESOURCE_ATTRIBUTES = _strings("namespace", "verb", "group", "version", "resource", "subresource", "name")
KINDS: dict[str, Spec] = {
    "SelfSubjectAccessReview": {
        1: ("metadata", OBJECT_META),
        2: (
            "spec",
            {1: ("resourceAttributes", RESOURCE_ATTRIBUTES), 2: ("nonResourceAttributes", _strings("path", "verb"))},
        ),
    },
    "SelfSubjectRulesReview": {1: ("metadata", OBJECT_META), 2: ("spec", {1: ("namespace", "string")})},
    "Pod": {1: ("metadata", OBJECT_META), 2: ("spec", POD_SPEC)},
    "Job": {1: ("metadata", OBJECT_META), 2: ("spec", JOB_SPEC)},
    "Namespace": {1: ("metadata", OBJECT_META), 2: ("spec", {1: ("finalizers", ("repeated", "string"))})},
    "ResourceQuota": {
        1: ("metadata", OBJECT_META),
        2: ("spec", {1: ("hard", ("map", "quantity")), 2: ("scopes", ("repeated", "string"))}),
    },
    "PriorityClass": {
        1: ("metadata", OBJECT_META),
        2: ("value", "int"),
        3: ("globalDefault", "bool"),
        4: ("description", "string"),
        5: ("preemptionPolicy", "string"),
    },
    "Eviction": {
        1: ("metadata", OBJECT_META),
        2: (
            "deleteOptions",
            {
                1: ("gracePeriodSeconds", "int"),
                2: ("preconditions", _strings("uid", "resourceVersion")),
                4: ("propagationPolicy", "string"),
                5: ("dryRun", ("repeated", "string")),
            },
        ),
    },
    "Role": {1: ("metadata", OBJECT_META), 2: ("rules", ("repeated", POLICY_RULE))},
    "ClusterRole": {1: ("metadata", OBJECT_META), 2: ("rules", ("repeated", POLICY_RULE))},
    "RoleBinding": BINDING,
    "ClusterRoleBinding": BINDING,
}


def decode_object(raw: bytes) -> dict:
    """A protobuf-encoded object of one of ``KINDS`` as its JSON form."""
    if not raw.startswith(MAGIC):
        raise ApiError(400, "BadRequest", "protobuf body without the k8s magic prefix")
    try:
        unknown = fields(raw[len(MAGIC) :])
        type_meta = decode(unknown.get(1, [b""])[-1], _strings("apiVersion", "kind"))
        spec = KINDS.get(type_meta.get("kind", ""))
        if spec is None:
            raise unsupported()
        return {**type_meta, **decode(unknown.get(2, [b""])[-1], spec)}
    except (ValueError, UnicodeDecodeError, IndexError, KeyError) as exc:
        raise ApiError(400, "BadRequest", f"the protobuf body could not be decoded: {exc}") from None


def unsupported() -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"kubesim reads {PROTOBUF} only for {', '.join(KINDS)}; send application/json",
    )
