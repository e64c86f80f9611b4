from django.utils.functional import SimpleLazyObject

from . import cluster_selectors
from .selectors import sees_all_namespaces


def leader(request) -> dict:
    """The leader for the page header; queried only by pages that show it. Its host and
    process only for staff."""
    staff = sees_all_namespaces(request.user) if hasattr(request, "user") else False
    return {"leader": SimpleLazyObject(lambda: cluster_selectors.leader(reveal_identity=staff))}
