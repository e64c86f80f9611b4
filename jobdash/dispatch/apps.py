from django.apps import AppConfig


class DispatchConfig(AppConfig):
    name = "jobdash.dispatch"
    label = "dispatch"

    def ready(self) -> None:
        from django.conf import settings

        from jobdash.jobs.signals import queue_changed
        from queueing.devices import DeviceModel, register

        for row in settings.JOBDASH_DEVICE_MODELS:  # a site's own GPU-sharing models
            register(DeviceModel.from_json(row))

        from jobdash.dispatch import kick

        queue_changed.connect(kick.on_queue_changed, dispatch_uid="jobdash-kick")
