from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    label = "webhooks"
    verbose_name = "Admission webhook"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the system checks
