"""Whether a topology config's jobs ran where their requests say (bench.kueue_baseline with a
topology, --config tas): read after a run from kubesim's pods (a TFJob's pods stay once it
succeeds), each pod's node mapped to its rack by the shape's node groups.

- required_broken: jobs of a "required" class whose pods are in more than one domain;
- slices_broken: jobs of a "balanced" class (slices) with a slice in more than one domain
  (a slice is the pods whose replica index // slice size is the same, as jobdash's planner
  cuts them: queueing/topology.py);
- preferred_spread: jobs of a "preferred" class in more than one domain (allowed, counted);
- pods: pods looked at, and unplaced: pods with no node or a node of no domain.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections import defaultdict

from bench.kueue_shape import Shape
from bench.kueue_submit import class_of

JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
PAGE = 5_000


def domains_of(shape: Shape, level: str) -> dict[str, str]:
    """Node name -> its value of the level's label (the nodes kubesim made of node_groups)."""
    out = {}
    for group in shape.node_groups():
        value = (group.get("labels") or {}).get(level)
        if value is not None:
            for i in range(group["count"]):
                out[f"{group['prefix']}-{i}"] = value
    return out


def pods(url: str, token: str) -> list[dict]:
    """Every pod, paged (name, namespace, labels, node)."""
    found, cont = [], ""
    while True:
        query = urllib.parse.urlencode({"limit": PAGE, **({"continue": cont} if cont else {})})
        request = urllib.request.Request(f"{url}/api/v1/pods?{query}", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=120) as response:
            page = json.loads(response.read())
        for pod in page.get("items", []):
            meta = pod.get("metadata", {})
            found.append(
                {
                    "namespace": meta.get("namespace"),
                    "labels": meta.get("labels") or {},
                    "node": (pod.get("spec") or {}).get("nodeName"),
                }
            )
        cont = (page.get("metadata") or {}).get("continue") or ""
        if not cont:
            return found


def check(shape: Shape, listed: list[dict]) -> dict:
    """The counts of the module's docstring, for the pods `listed` (as pods() returns them)."""
    levels = {cls.level for cls in shape.classes.values() if cls.level}
    where = {level: domains_of(shape, level) for level in levels}
    jobs: dict[tuple[str, str], list[tuple[int, str | None]]] = defaultdict(list)
    for pod in listed:
        name = pod["labels"].get(JOB_NAME)
        if name and class_of(name) in shape.classes:
            jobs[(pod["namespace"], name)].append((int(pod["labels"].get(REPLICA_INDEX, 0)), pod["node"]))
    out = {"jobs": len(jobs), "pods": 0, "unplaced": 0, "required_broken": 0, "slices_broken": 0, "preferred_spread": 0}
    for (_namespace, name), members in jobs.items():
        cls = shape.classes[class_of(name)]
        if not cls.level:
            continue
        domain = where[cls.level]
        out["pods"] += len(members)
        out["unplaced"] += sum(1 for _, node in members if node is None or node not in domain)
        spread = {domain.get(node or "") for _, node in members}
        if cls.topology == "required" and len(spread) > 1:
            out["required_broken"] += 1
        elif cls.topology == "preferred" and len(spread) > 1:
            out["preferred_spread"] += 1
        elif cls.topology == "balanced":
            size = cls.slice_size or 1
            slices: dict[int, set] = defaultdict(set)
            for index, node in members:
                slices[index // size].add(domain.get(node or ""))
            if any(len(racks) > 1 for racks in slices.values()):
                out["slices_broken"] += 1
    return out
