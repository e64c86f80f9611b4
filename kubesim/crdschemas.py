"""The custom resources' schemas (their CRDs' openAPIV3Schema, the fields kubesim knows).

Built from kubesim's own tables (the training-operator kinds' replica-spec fields and
replica types, each kind's group/version) with the core types they embed by reference
(``io.k8s.api.core.v1.PodTemplateSpec``, ``...batch.v1.JobTemplateSpec``, resources), the
way controller-gen inlines them. Subtrees kubesim does not model are open objects
(``x-kubernetes-preserve-unknown-fields``), so nothing valid is ever refused for them.
"""

from __future__ import annotations

from . import jobset, mpijob, queuedjob, trainer, trainingop

CORE = "#/components/schemas/io.k8s.api.core.v1."
OBJECT_META = {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}


def _ref(name: str, description: str = "") -> dict:
    schema: dict = {"$ref": CORE + name} if "." not in name else {"$ref": f"#/components/schemas/{name}"}
    if description:
        schema = {"allOf": [schema], "description": description}
    return schema


def _t(kind: str, description: str, fmt: str = "", **extra) -> dict:
    schema: dict = {"type": kind, "description": description, **extra}
    if fmt:
        schema["format"] = fmt
    return schema


def _obj(description: str, properties: dict | None = None, required: list[str] | None = None, **extra) -> dict:
    schema: dict = {"type": "object", "description": description}
    if properties is not None:
        schema["properties"] = properties
    else:
        schema["x-kubernetes-preserve-unknown-fields"] = True
    if required:
        schema["required"] = required
    return {**schema, **extra}


def _map(description: str, values: dict) -> dict:
    return {"type": "object", "description": description, "additionalProperties": values}


def _list(description: str, items: dict) -> dict:
    return {"type": "array", "description": description, "items": items}


def _kind(description: str, spec: dict, status: dict | None = None) -> dict:
    properties = {
        "apiVersion": _t("string", "APIVersion defines the versioned schema of this representation of an object."),
        "kind": _t("string", "Kind is a string value representing the REST resource this object represents."),
        "metadata": OBJECT_META,
        "spec": spec,
    }
    if status is not None:
        properties["status"] = status
    return {"type": "object", "description": description, "properties": properties}


CONDITIONS = _list("Conditions is an array of current observed job conditions.", _obj("A job condition."))
JOB_STATUS = _obj(
    "Most recently observed status of the job.",
    {
        "conditions": CONDITIONS,
        "replicaStatuses": _map("ReplicaStatuses is map of ReplicaType and ReplicaStatus.", _obj("A replica status.")),
        "startTime": _t("string", "Represents time when the job was acknowledged by the job controller.", "date-time"),
        "completionTime": _t("string", "Represents time when the job was completed.", "date-time"),
        "lastReconcileTime": _t("string", "Represents last time when the job was reconciled.", "date-time"),
    },
)
RUN_POLICY = _obj(
    "RunPolicy encapsulates various runtime policies of the distributed training job, for example how to "
    "clean up resources and how long the job can stay active.",
    {
        "cleanPodPolicy": _t(
            "string", "CleanPodPolicy defines the policy to kill pods after the job completes. Default to None."
        ),
        "ttlSecondsAfterFinished": _t("integer", "TTLSecondsAfterFinished is the TTL to clean up jobs.", "int32"),
        "activeDeadlineSeconds": _t(
            "integer",
            "Specifies the duration in seconds relative to the startTime that the job may be active.",
            "int64",
        ),
        "backoffLimit": _t("integer", "Optional number of retries before marking this job failed.", "int32"),
        "schedulingPolicy": _obj("SchedulingPolicy defines the policy related to scheduling, e.g. gang-scheduling"),
        "suspend": _t(
            "boolean",
            "suspend specifies whether the Job controller should create Pods or not. If a Job is suspended after "
            "creation, the Job controller will delete all active Pods associated with this Job.",
            default=False,
        ),
        "managedBy": _t(
            "string",
            "ManagedBy is used to indicate the controller or entity that manages a job: kubeflow.org/training-operator "
            "or kueue.x-k8s.io/multikueue. The field is immutable.",
        ),
    },
)


def _replica_spec(restart: str) -> dict:
    return _obj(
        "ReplicaSpec is a description of the replica",
        {
            "replicas": _t(
                "integer",
                "Replicas is the desired number of replicas of the given template. If unspecified, defaults to 1.",
                "int32",
            ),
            "restartPolicy": _t(
                "string",
                f"Restart policy for all replicas within the job. One of Always, OnFailure, Never and ExitCode. "
                f"Default to {restart}.",
            ),
            "template": _ref(
                "PodTemplateSpec",
                "Template is the object that describes the pod that will be created for this replica.",
            ),
        },
    )


def _training_kind(kind: trainingop.TrainingKind) -> dict:
    properties: dict = {
        "runPolicy": RUN_POLICY,
        kind.specs_field: _map(
            f"A map of {', '.join(kind.replica_types)} to ReplicaSpec that specifies the {kind.kind} replicas to run.",
            _replica_spec(kind.default_restart),
        ),
    }
    if kind is trainingop.TFJOB:
        properties["successPolicy"] = _t("string", "SuccessPolicy defines the policy to mark the TFJob as succeeded.")
        properties["enableDynamicWorker"] = _t("boolean", "A switch to enable dynamic worker")
    if kind in (trainingop.PYTORCHJOB, trainingop.PADDLEJOB):
        properties["elasticPolicy"] = _obj("ElasticPolicy holds the elastic policy for the job.")
    if kind is trainingop.PYTORCHJOB:
        properties["nprocPerNode"] = _t(
            "string", "Number of workers per node; supported values: [auto, cpu, gpu, int]."
        )
    return _kind(
        f"{kind.kind} represents a {kind.kind} resource.",
        _obj(f"Specification of the desired state of the {kind.kind}.", properties, [kind.specs_field]),
        JOB_STATUS,
    )


MPIJOB = _kind(
    "MPIJob is the Schema for the mpijobs API (mpi-operator v2beta1).",
    _obj(
        "MPIJobSpec",
        {
            "slotsPerWorker": _t("integer", "Specifies the number of slots per worker used in hostfile.", "int32"),
            "runLauncherAsWorker": _t(
                "boolean", "RunLauncherAsWorker indicates whether to run the launcher as a worker."
            ),
            "runPolicy": RUN_POLICY,
            "mpiImplementation": _t("string", "MPIImplementation is the MPI implementation: OpenMPI, Intel or MPICH."),
            "launcherCreationPolicy": _t(
                "string", "When to create the launcher Job: AtStartup or WaitForWorkersReady."
            ),
            "sshAuthMountPath": _t("string", "SSHAuthMountPath is the directory where SSH keys are mounted."),
            "mpiReplicaSpecs": _map(
                "MPIReplicaSpecs contains maps from `MPIReplicaType` (Launcher, Worker) to `ReplicaSpec`.",
                _replica_spec("Never"),
            ),
        },
        ["mpiReplicaSpecs"],
    ),
    JOB_STATUS,
)

REPLICATED_JOB = _obj(
    "A group of identical Jobs.",
    {
        "name": _t("string", "Name is the name of the entry and will be used as a suffix for the Job name."),
        "groupName": _t("string", "GroupName defines the name of the group this ReplicatedJob belongs to."),
        "replicas": _t(
            "integer", "Replicas is the number of jobs created from this ReplicatedJob's template.", "int32"
        ),
        "template": _ref(
            "io.k8s.api.batch.v1.JobTemplateSpec", "Template defines the template of the Job that will be created."
        ),
        "dependsOn": _list("The ReplicatedJobs this one waits for.", _obj("DependsOn")),
    },
    ["name", "template"],
)
JOBSET_SPEC = _obj(
    "JobSetSpec defines the desired state of JobSet",
    {
        "replicatedJobs": _list("ReplicatedJobs is the group of jobs that will form the set.", REPLICATED_JOB),
        "network": _obj("Network defines the networking options for the jobset."),
        "successPolicy": _obj("SuccessPolicy configures when to declare the JobSet as succeeded."),
        "failurePolicy": _obj("FailurePolicy configures when to declare the JobSet as failed."),
        "startupPolicy": _obj("StartupPolicy configures in what order jobs must be started."),
        "suspend": _t("boolean", "Suspend suspends all running child Jobs when set to true."),
        "coordinator": _obj("Coordinator can be used to assign a specific pod as the coordinator for the JobSet."),
        "managedBy": _t("string", "ManagedBy is used to indicate the controller or entity that manages a JobSet."),
        "ttlSecondsAfterFinished": _t("integer", "TTL to clean up the JobSet after it finished.", "int32"),
    },
)
JOBSET = _kind("JobSet is the Schema for the jobsets API", JOBSET_SPEC, _obj("JobSetStatus"))

TRAINJOB = _kind(
    "TrainJob represents configuration of a training job.",
    _obj(
        "spec of the TrainJob.",
        {
            "runtimeRef": _obj(
                "runtimeRef is the reference to the training runtime.",
                {
                    "name": _t("string", "name of the runtime being referenced."),
                    "apiGroup": _t("string", "apiGroup of the runtime being referenced."),
                    "kind": _t("string", "kind of the runtime: ClusterTrainingRuntime (default) or TrainingRuntime."),
                },
                ["name"],
            ),
            "initializer": _obj("initializer defines the configuration of the initializer."),
            "trainer": _obj(
                "trainer defines the configuration of the trainer.",
                {
                    "image": _t("string", "image is the container image for the training container."),
                    "command": _list("command for the entrypoint of the training container.", _t("string", "")),
                    "args": _list("args for the entrypoint for the training container.", _t("string", "")),
                    "env": _list(
                        "env is the list of environment variables to set in the training container.", _ref("EnvVar")
                    ),
                    "numNodes": _t("integer", "numNodes is the number of training nodes.", "int32"),
                    "resourcesPerNode": _ref(
                        "ResourceRequirements", "resourcesPerNode defines the compute resources for each training node."
                    ),
                    "numProcPerNode": {
                        "x-kubernetes-int-or-string": True,
                        "description": "Number of processes/workers per node.",
                    },
                },
            ),
            "labels": _map("labels to apply for the derivative JobSet and Jobs.", _t("string", "")),
            "annotations": _map("annotations to apply for the derivative JobSet and Jobs.", _t("string", "")),
            "podTemplateOverrides": _list("Custom overrides for the training runtime.", _obj("PodTemplateOverride")),
            "podSpecOverrides": _list("Custom overrides for the training runtime (earlier name).", _obj("Override")),
            "activeDeadlineSeconds": _t(
                "integer", "The duration in seconds the TrainJob may be active before it is terminated.", "int64"
            ),
            "suspend": _t("boolean", "suspend defines whether to suspend the running TrainJob."),
            "managedBy": _t(
                "string", "managedBy is used to indicate the controller or entity that manages a TrainJob."
            ),
        },
        ["runtimeRef"],
    ),
    _obj(
        "status of the TrainJob.",
        {"conditions": CONDITIONS, "jobsStatus": _list("The status of the jobs.", _obj("JobStatus"))},
    ),
)
RUNTIME_SPEC = _obj(
    "TrainingRuntimeSpec represents a specification of the desired training runtime.",
    {
        "mlPolicy": _obj("mlPolicy provides the ML-specific parameters for the model training."),
        "podGroupPolicy": _obj("podGroupPolicy defines the configuration for the PodGroup to enable gang-scheduling."),
        "template": _obj(
            "template for the JobSet which will be used by TrainJob.",
            {"metadata": OBJECT_META, "spec": JOBSET_SPEC},
        ),
    },
    ["template"],
)

QUEUEDJOB = _kind(
    "QueuedJob is a job waiting in jobdash's queue: its place, reason and likely start. Written by jobdash only.",
    _obj(
        "The jobdash job this object stands for.",
        {
            "jobId": _t("integer", "jobdash's id of the job.", "int64"),
            "kind": _t("string", "The kind of the job's object (TFJob, Job, JobSet, ...)."),
            "apiVersion": _t("string", "The apiVersion of the job's object."),
            "name": _t("string", "The name of the job's object in this namespace."),
        },
        ["jobId", "kind", "name"],
    ),
    _obj(
        "Where the job stands in jobdash's queue, as its page says.",
        {
            "state": _t("string", "The job's state in jobdash (Queued)."),
            "position": _t("integer", "Its place in the queue: 1 goes first.", "int32"),
            "reason": _t("string", "What it waits for (QuotaExceeded, NoNodeFits, ...)."),
            "message": _t("string", "Why it waits, in words."),
            "likelyStart": _t("string", "The likely start (calibrated forecast).", "date-time"),
            "lateBound": _t("string", "The 90 % late bound of the start.", "date-time"),
        },
    ),
)


def crd_definition_name(group: str, kind: str) -> str:
    """A custom resource's definition name, as the API server names it (its group reversed)."""
    return ".".join(reversed(group.split("."))) + f".v.{kind}"


CRD_SCHEMAS: dict[str, dict] = {
    **{crd_definition_name(trainingop.GROUP, k.kind): _training_kind(k) for k in trainingop.KINDS},
    crd_definition_name(mpijob.GROUP, mpijob.KIND): MPIJOB,
    crd_definition_name(jobset.GROUP, jobset.KIND): JOBSET,
    crd_definition_name(trainer.GROUP, trainer.KIND): TRAINJOB,
    crd_definition_name(queuedjob.GROUP, queuedjob.KIND): QUEUEDJOB,
    crd_definition_name(trainer.GROUP, "TrainingRuntime"): _kind(
        "TrainingRuntime represents a training runtime.", RUNTIME_SPEC
    ),
    crd_definition_name(trainer.GROUP, "ClusterTrainingRuntime"): _kind(
        "ClusterTrainingRuntime represents a training runtime which can be referenced as part of `runtimeRef` "
        "API in TrainJob.",
        RUNTIME_SPEC,
    ),
}
