"""TFJob (kubeflow.org/v1), validated the way the training-operator does.

Replica types and the "tensorflow" container follow the operator's
ValidateV1TFJob; Chief and Master are two names for the same coordinator,
so only one may be used, and coordinator/evaluator types run a single pod.
"""

from __future__ import annotations

from .kubeflow import ReplicatedJobAdapter
from .workload import register

TFJOB = register(
    ReplicatedJobAdapter(
        api_version="kubeflow.org/v1",
        kind="TFJob",
        plural="tfjobs",
        replica_specs_field="tfReplicaSpecs",
        replica_types=("Chief", "Master", "PS", "Worker", "Evaluator"),
        singleton_types=frozenset({"Chief", "Master", "Evaluator"}),
        exclusive_types=(frozenset({"Chief", "Master"}),),
        container_name="tensorflow",
        success_policies=("", "AllWorkers"),
    )
)
