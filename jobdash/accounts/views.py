from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.cache import patch_cache_control
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from . import services

# The new key travels from the POST to the next GET in the (server-side) session and is
# shown on that one page only: afterwards the page shows its first characters.
NEW_KEY = "jobdash-new-api-key"


@login_required
@require_http_methods(["GET", "POST"])
def api_token(request):
    """One token per user: create (or replace) it, or revoke it."""
    if request.method == "POST":
        if request.POST.get("action") == "create":
            request.session[NEW_KEY] = services.token_issue(request.user).key
            messages.success(request, "New API token created. The old one, if any, no longer works.")
        else:
            services.token_revoke(request.user)
            request.session.pop(NEW_KEY, None)
            messages.success(request, "API token revoked.")
        return redirect("api-token")
    token = Token.objects.filter(user=request.user).first()
    new_key = request.session.pop(NEW_KEY, None)
    shown = new_key if token is not None and new_key == token.key else None
    response = render(request, "accounts/token.html", {"token": token, "new_key": shown})
    # Neither the browser nor a proxy keeps a page that held a key.
    patch_cache_control(response, no_store=True, private=True)
    return response


class LoginPage(auth_views.LoginView):
    """Local accounts stay (`make run`, the break-glass admin); the platform's sign-in is
    offered first when it is configured."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["oidc_provider"] = settings.JOBDASH_OIDC_PROVIDER_NAME if settings.JOBDASH_OIDC_ISSUER else ""
        return context


login_page = LoginPage.as_view()
