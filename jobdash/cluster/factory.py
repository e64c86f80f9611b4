from django.conf import settings

from .kube import KubeGateway


def gateway_from_settings() -> KubeGateway:
    """JOBDASH_CLUSTER: `sim` and `kubeconfig` read KUBECONFIG (kubesim writes one); `incluster`
    uses the pod's service account."""
    mode = settings.JOBDASH_CLUSTER
    if mode not in ("sim", "kubeconfig", "incluster"):
        raise ValueError(f"JOBDASH_CLUSTER must be sim, kubeconfig or incluster, not {mode!r}")
    return KubeGateway.from_settings("incluster" if mode == "incluster" else "kubeconfig", settings.KUBECONFIG)
