from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "jobdash.usage"
    label = "usage"
    verbose_name = "Usage"
    default_auto_field = "django.db.models.BigAutoField"
