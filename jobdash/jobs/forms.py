from typing import cast

from django import forms

from . import services
from .exceptions import InvalidInput, JobdashError
from .priority import PRIORITY_MAX, PRIORITY_MIN


class SubmitForm(forms.Form):
    namespace = forms.ChoiceField(help_text="Used when the manifest has no metadata.namespace.", required=False)
    priority_class = forms.ChoiceField(
        required=False,
        label="Priority class",
        help_text="Blank: the pods' priorityClassName, else the namespace's default class.",
    )
    priority = forms.IntegerField(
        initial=0,
        required=False,
        min_value=PRIORITY_MIN,
        max_value=PRIORITY_MAX,
        help_text="Staff only: a number that wins over the class.",
    )
    manifest = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 28, "spellcheck": "false", "class": "code"}),
        help_text="One training job, one YAML document: a TFJob, PyTorchJob, MPIJob, batch Job, JobSet, TrainJob, ...",
    )

    def __init__(self, *args, namespaces=(), priority_classes=(), **kwargs):
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["priority_class"]).choices = [
            ("", "— from the pods or the namespace —")
        ] + [(c.name, f"{c.name} ({c.value})") for c in priority_classes]
        cast(forms.ChoiceField, self.fields["namespace"]).choices = [("", "— from the manifest —")] + [
            (n, n) for n in namespaces
        ]
        self.manifest_problems = []

    def submit(self, *, user, source: str):
        """Submit a valid form through job_submit. On refusal return None and keep the
        reasons: manifest problems (with paths) apart, so they can sit next to the YAML."""
        try:
            return services.job_submit(
                user=user,
                manifest=self.cleaned_data["manifest"],
                source=source,
                priority=self.cleaned_data["priority"] or 0,
                priority_class=self.cleaned_data["priority_class"],
                namespace=self.cleaned_data["namespace"] or None,
            )
        except InvalidInput as error:
            for problem in error.problems:
                if problem.path in ("priority", "priority_class"):
                    self.add_error(problem.path, problem.message)
                else:
                    self.manifest_problems.append(problem)
        except JobdashError as error:
            self.add_error(None, error.message)
        return None


class ReasonForm(forms.Form):
    """An optional reason, for the timeline: cancel and requeue ask for one."""

    reason = forms.CharField(required=False, max_length=500)


class PriorityForm(forms.Form):
    priority = forms.IntegerField(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX)
