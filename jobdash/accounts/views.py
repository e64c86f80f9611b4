from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from . import services


@login_required
@require_http_methods(["GET", "POST"])
def api_token(request):
    """One token per user: create (or replace) it, or revoke it."""
    if request.method == "POST":
        if request.POST.get("action") == "create":
            services.token_issue(request.user)
            messages.success(request, "New API token created. The old one, if any, no longer works.")
        else:
            services.token_revoke(request.user)
            messages.success(request, "API token revoked.")
        return redirect("api-token")
    token = Token.objects.filter(user=request.user).first()
    return render(request, "accounts/token.html", {"token": token})
