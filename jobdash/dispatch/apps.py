from django.apps import AppConfig


class DispatchConfig(AppConfig):
    name = "jobdash.dispatch"
    label = "dispatch"

    def ready(self) -> None:
        from jobdash.jobs.signals import queue_changed

        from . import kick

        queue_changed.connect(kick.on_queue_changed, dispatch_uid="jobdash-kick")
