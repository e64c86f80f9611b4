import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobdash.settings")

app = Celery("jobdash")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["jobdash.dispatch", "jobdash.usage"])
