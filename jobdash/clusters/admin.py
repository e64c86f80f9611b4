from django.contrib import admin

from .models import Cluster, LeftCopy


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    """Connections come from JOBDASH_CLUSTERS (checked at start); here: health, and cordoning."""

    list_display = ("name", "health", "cordoned", "answered_at", "lost_at", "labels")
    list_filter = ("health", "cordoned")
    readonly_fields = ("name", "labels", "health", "answered_at", "lost_at")
    fields = ("name", "labels", "health", "answered_at", "lost_at", "cordoned")

    def has_add_permission(self, request) -> bool:
        return False  # a cluster is added to JOBDASH_CLUSTERS, which the dispatcher reads at start

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(LeftCopy)
class LeftCopyAdmin(admin.ModelAdmin):
    list_display = ("job_id", "cluster", "kind_key", "namespace", "name", "left_at", "deleted_at")
    list_filter = ("cluster",)
    readonly_fields = ("job_id", "cluster", "kind_key", "namespace", "name", "left_at", "deleted_at")

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # the record of a copy jobdash deletes when its cluster answers again: never forgotten by hand

    def has_change_permission(self, request, obj=None) -> bool:
        return False
