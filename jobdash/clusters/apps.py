from django.apps import AppConfig
from django.conf import settings


class ClustersConfig(AppConfig):
    name = "jobdash.clusters"
    label = "clusters"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # JOBDASH_CLUSTERS is checked when any process starts: a bad file stops it, naming the field.
        if settings.JOBDASH_CLUSTERS:
            from .config import load

            load(settings.JOBDASH_CLUSTERS)
