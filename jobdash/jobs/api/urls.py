from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from . import views
from .cluster import cluster_view
from .lent_pools import LentPoolViewSet
from .status import status_view
from .workflows import WorkflowViewSet

router = DefaultRouter()
router.register("jobs", views.JobViewSet, basename="job")
router.register("namespaces", views.NamespaceViewSet, basename="namespace")
router.register("lent-pools", LentPoolViewSet, basename="lent-pool")
router.register("workflows", WorkflowViewSet, basename="workflow")

urlpatterns = [
    path("status/", status_view, name="api-status"),
    path("cluster/", cluster_view, name="api-cluster"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    *router.urls,
]
