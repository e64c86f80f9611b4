"""Helpers shared by the per-kind adapter tests."""

import copy

import pytest

from queueing import ManifestError, workload_from_manifest

GI = 2**30
MI = 2**20


def container(name, cpu="1", memory="1Gi", image="busybox:1.36", **extra):
    return {
        "name": name,
        "image": image,
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
        **extra,
    }


def steps(path):
    """ "a.b[0].c" -> ["a", "b", 0, "c"]; keys may not contain dots."""
    result = []
    for part in path.replace("[", ".[").split("."):
        result.append(int(part[1:-1]) if part.startswith("[") else part)
    return result


def with_value(manifest, path, value):
    """Copy of ``manifest`` with ``path`` set; ``None`` as value deletes the key."""
    result = copy.deepcopy(manifest)
    *parents, last = steps(path)
    target = result
    for step in parents:
        target = target[step]
    if value is None and isinstance(target, dict):
        target.pop(last, None)
    else:
        target[last] = value
    return result


def errors_of(manifest, runtimes=None) -> dict[str, str]:
    with pytest.raises(ManifestError) as caught:
        workload_from_manifest(manifest, runtimes)
    return {error.path: error.message for error in caught.value.errors}


def shape(workload):
    """[(role, count, per-pod requests)] of a Workload."""
    return [(p.role, p.count, dict(p.requests)) for p in workload.pod_sets]


def condition(kind, status="True", message=""):
    return {"type": kind, "status": status, "message": message}


class Runtimes:
    """An in-memory RuntimeSource: (kind, namespace, name) -> object; records its reads."""

    def __init__(self, *objects):
        self.objects = {}
        self.reads = []
        for obj in objects:
            namespace = obj["metadata"].get("namespace", "") if obj["kind"] == "TrainingRuntime" else ""
            self.objects[(obj["kind"], namespace, obj["metadata"]["name"])] = obj

    def runtime(self, kind, namespace, name):
        self.reads.append((kind, namespace, name))
        return self.objects.get((kind, namespace, name))
