"""kubesim: a simulated Kubernetes cluster serving the part of the API jobdash uses.

See kubesim.cluster.Cluster (the model), kubesim.server (HTTP), kubesim.testing
(in-process helper for tests) and ``python -m kubesim serve``.
"""
