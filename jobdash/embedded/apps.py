from django.apps import AppConfig


class EmbeddedConfig(AppConfig):
    """Installed everywhere, used by `make run` alone: it only adds run_embedded."""

    name = "jobdash.embedded"
    label = "embedded"
