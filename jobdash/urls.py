from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from jobdash.accounts.oidc import oidc_callback, oidc_login
from jobdash.accounts.views import api_token, login_page
from jobdash.health import healthz
from jobdash.metrics.exposition import metrics_view
from jobdash.usage.api import usage_view
from jobdash.usage.views import usage_page

# The admission webhook is not routed here: it has its own listener (webhooks/wsgi.py),
# which only the API server can reach.

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/usage/", usage_view, name="api-usage"),
    path("api/v1/", include("jobdash.jobs.api.urls")),
    path("login/", login_page, name="login"),
    path("login/oidc/", oidc_login, name="oidc-login"),
    path("login/oidc/callback/", oidc_callback, name="oidc-callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/token/", api_token, name="api-token"),
    path("healthz", healthz, name="healthz"),
    # (answered first by jobdash.metrics.exposition.MetricsEndpoint, before the host check)
    path("metrics", metrics_view, name="metrics"),
    path("favicon.ico", RedirectView.as_view(url=static("jobdash/favicon.svg"), permanent=True)),
    path("usage/", usage_page, name="usage"),
    path("", include("jobdash.jobs.urls")),
]
