from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "jobdash.accounts"
    label = "accounts"
