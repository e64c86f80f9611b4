from django.urls import path

from . import views

urlpatterns = [
    path("admission/tfjobs", views.admission_tfjobs, name="admission-tfjobs"),
]
