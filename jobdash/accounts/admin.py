"""API tokens in the operators' console: list, issue (e.g. for a service account), revoke.

DRF's own TokenAdmin is kept for what it does well (its URLs carry the user's id, never
the key, so keys stay out of access logs); writes go through accounts.services, and the
key is shown once, right after it is issued, and masked everywhere else."""

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from rest_framework.authtoken.admin import TokenAdmin as DRFTokenAdmin
from rest_framework.authtoken.models import TokenProxy

from . import services

admin.site.unregister(TokenProxy)


class TokenIssueForm(forms.ModelForm):
    class Meta:
        model = TokenProxy
        fields = ("user",)

    def validate_unique(self):
        pass  # issuing for a user who has a token replaces it (accounts.services.token_issue)


@admin.register(TokenProxy)
class TokenAdmin(DRFTokenAdmin):
    form = TokenIssueForm
    list_display = ("user", "masked_key", "created")
    list_select_related = ("user",)
    readonly_fields = ()

    @admin.display(description="key")
    def masked_key(self, token) -> str:
        return f"{token.key[:4]}…"

    def has_change_permission(self, request, obj=None):
        # The change page only shows whose token it is; a token is replaced, never edited.
        return request.method in ("GET", "HEAD") and super().has_change_permission(request, obj)

    def save_model(self, request, obj, form, change):
        token = services.token_issue(form.cleaned_data["user"])
        obj.key, obj.created = token.key, token.created  # Token.pk is the key

    def response_add(self, request, obj, post_url_continue=None):
        # The only time the key is shown in the console: copy it now.
        messages.success(request, f"Token for {obj.user} issued (any old one revoked): {obj.key}")
        return HttpResponseRedirect(reverse("admin:authtoken_tokenproxy_changelist"))

    def delete_model(self, request, obj):
        services.token_revoke(obj.user)

    def delete_queryset(self, request, queryset):
        for token in queryset.select_related("user"):
            services.token_revoke(token.user)
