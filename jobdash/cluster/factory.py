from django.conf import settings

from jobdash.clusters.config import ClusterConfig, load

from .kube import KubeGateway
from .multi import MultiGateway


def gateway_from_settings() -> KubeGateway | MultiGateway:
    """JOBDASH_CLUSTERS (a file naming two or more clusters): one gateway over them all
    (multi.py). Else JOBDASH_CLUSTER: `sim` and `kubeconfig` read KUBECONFIG (kubesim writes
    one); `incluster` uses the pod's service account."""
    if settings.JOBDASH_CLUSTERS:
        return gateway_of(load(settings.JOBDASH_CLUSTERS))
    mode = settings.JOBDASH_CLUSTER
    if mode not in ("sim", "kubeconfig", "incluster"):
        raise ValueError(f"JOBDASH_CLUSTER must be sim, kubeconfig or incluster, not {mode!r}")
    return KubeGateway.from_settings("incluster" if mode == "incluster" else "kubeconfig", settings.KUBECONFIG)


def gateway_of(clusters: list[ClusterConfig]) -> KubeGateway | MultiGateway:
    """One cluster's gateway, or with several the one over them all."""
    gateways = {
        cluster.name: KubeGateway.from_settings(
            "incluster" if cluster.incluster else "kubeconfig", cluster.kubeconfig, cluster.context
        )
        for cluster in clusters
    }
    if len(gateways) == 1:
        return next(iter(gateways.values()))
    return MultiGateway(gateways, {cluster.name: cluster.labels for cluster in clusters})
