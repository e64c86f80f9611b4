from django import forms

from .services import PRIORITY_MAX, PRIORITY_MIN


class SubmitForm(forms.Form):
    namespace = forms.ChoiceField(
        help_text="Used when the manifest has no metadata.namespace.", required=False
    )
    priority = forms.IntegerField(initial=0, min_value=PRIORITY_MIN, max_value=PRIORITY_MAX)
    manifest = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 28, "spellcheck": "false", "class": "code"}),
        help_text="A kubeflow.org/v1 TFJob, one YAML document.",
    )

    def __init__(self, *args, namespaces=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["namespace"].choices = [("", "— from the manifest —")] + [(n, n) for n in namespaces]


class CancelForm(forms.Form):
    reason = forms.CharField(required=False, max_length=500)
