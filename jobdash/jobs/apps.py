from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobdash.jobs"
    label = "jobs"
    verbose_name = "Jobs"
