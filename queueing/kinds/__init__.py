"""One adapter per job kind; importing this package registers all of them.

Each module validates its kind as the kind's own controller and webhook do, reduces it to
a Workload, and says where its suspend flag lives, how its pods are labelled and how its
status reads (the JobAdapter protocol in queueing.workload).
"""

from __future__ import annotations

from . import batchjob, jobset, kubeflow, mpijob, pod, trainjob
from .batchjob import JOB, BatchJobAdapter, job_spec
from .jobset import JOBSET, JobSetAdapter, replicated_jobs
from .kubeflow import FAMILY, JAXJOB, PADDLEJOB, PYTORCHJOB, TFJOB, XGBOOSTJOB, ReplicatedJobAdapter
from .mpijob import MPIJOB, MPIJobAdapter
from .pod import POD, PodAdapter
from .trainjob import TRAINJOB, TrainJobAdapter

__all__ = [
    "FAMILY",
    "JAXJOB",
    "JOB",
    "JOBSET",
    "MPIJOB",
    "PADDLEJOB",
    "POD",
    "PYTORCHJOB",
    "TFJOB",
    "TRAINJOB",
    "XGBOOSTJOB",
    "BatchJobAdapter",
    "JobSetAdapter",
    "MPIJobAdapter",
    "PodAdapter",
    "ReplicatedJobAdapter",
    "TrainJobAdapter",
    "batchjob",
    "job_spec",
    "jobset",
    "kubeflow",
    "mpijob",
    "pod",
    "replicated_jobs",
    "trainjob",
]
