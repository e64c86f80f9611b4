from django.utils.functional import SimpleLazyObject

from . import cluster_selectors
from .dispatcher_health import dispatcher_health
from .selectors import sees_all_namespaces


def leader(request) -> dict:
    """The leader for the page header and the dispatcher's health for every page's banner;
    queried only by pages that show them. The leader's host and process, and the
    dispatcher's last error, only for staff."""
    staff = sees_all_namespaces(request.user) if hasattr(request, "user") else False
    return {
        "leader": SimpleLazyObject(lambda: cluster_selectors.leader(reveal_identity=staff)),
        "dispatcher": SimpleLazyObject(lambda: dispatcher_health(reveal=staff)),
    }
