import re
from typing import Any, cast

from django import forms
from django.utils import timezone

from queueing.eta import parse_duration
from queueing.failures import DEFAULT_RETRY_ON, RETRIABLE_CLASSES

from . import services, workflows
from .exceptions import FieldProblem, InvalidInput, JobdashError
from .models import Job, Workflow
from .priority import PRIORITY_MAX, PRIORITY_MIN

# A refusal's path (the API's field, as services name it) -> the form's field beside which it shows.
_FIELD_OF_PATH = {
    "priority": "priority",
    "priority_class": "priority_class",
    "after": "after",
    "array": "array",
    "retry": "retry_limit",
    "retry.limit": "retry_limit",
    "retry.on": "retry_on",
    "retry.exit_codes": "retry_exit_codes",
    "max_run_seconds": "max_run_time",
    "start_by": "start_by",
    "keep_if_never_satisfied": "keep_if_never_satisfied",
    "checkpoint_every": "checkpoint_every",
    "checkpoint_on_notice": "checkpoint_on_notice",
    "min_runtime": "min_runtime",
}
# The option fields in the order the submit page shows them.
OPTION_FIELDS = (
    "after",
    "array",
    "retry_limit",
    "retry_exit_codes",
    "max_run_time",
    "start_by",
    "checkpoint_every",
    "checkpoint_on_notice",
    "min_runtime",
    "retry_on",
    "keep_if_never_satisfied",
)
_DOCUMENT = re.compile(r"^\[\d+\]\.?")  # a bulk submission's "[3]." before a path
_ITEM = re.compile(r"\[\d+\]$")  # a list's item: "retry.exit_codes[1]"


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
        help_text="One training job, one YAML document: a TFJob, PyTorchJob, MPIJob, batch Job, JobSet, TrainJob, ...; "
        "or a workflow: a jobdash.io/v1 Workflow document, then its jobs, separated by ---.",
    )
    # Workflow options (issue 36): each, when given, wins over the manifest's jobdash.io/ annotation.
    after = forms.CharField(
        required=False,
        label="After",
        help_text="Start only once these jobs end: ok:NAME (succeeded), any:NAME (ended), notok:NAME (failed); "
        "NAME a job's name or id; comma-separated.",
    )
    array = forms.CharField(
        required=False,
        label="Array",
        help_text="One job per index, {{index}} in the manifest replaced by it: 0-19, 1,3,5-7, 0-15:4; "
        "%5 runs at most 5 at once.",
    )
    retry_limit = forms.IntegerField(
        required=False, label="Retry limit", help_text="Retries after the first attempt, 0 to 100 (default 3)."
    )
    retry_on = forms.MultipleChoiceField(
        required=False,
        label="Retry on",
        choices=[(cls, cls) for cls in RETRIABLE_CLASSES],
        widget=forms.CheckboxSelectMultiple,
        help_text="The failures retried; none checked: the manifest's, else "
        + ", ".join(sorted(DEFAULT_RETRY_ON))
        + ".",
    )
    retry_exit_codes = forms.CharField(
        required=False, label="Retry exit codes", help_text="Exit codes (1 to 255) that are retried, comma-separated."
    )
    max_run_time = forms.CharField(
        required=False, label="Max run time", help_text="Stopped once it has run this long: 90m, 12h, 2d."
    )
    start_by = forms.DateTimeField(
        required=False,
        label="Start by",
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    keep_if_never_satisfied = forms.BooleanField(
        required=False,
        label="Keep if never satisfied",
        help_text="A dependency that can never be met leaves it queued instead of cancelling it.",
    )
    # Checkpoints (issue 48): durations as the annotations take them; the service checks them
    # (queueing/checkpoint_options.py) and names the field of a bad one.
    checkpoint_every = forms.CharField(
        required=False, label="Checkpoint every", help_text="It writes a checkpoint this often: 10m, 1h."
    )
    checkpoint_on_notice = forms.CharField(
        required=False,
        label="Checkpoint on notice",
        help_text="How long it needs, once told it is preempted, to write one: 0s, 90s, 5m.",
    )
    min_runtime = forms.CharField(
        required=False,
        label="Minimum run time",
        help_text="Not preempted before it has run this long: 30m (default: the namespace's).",
    )

    def __init__(self, *args, namespaces=(), priority_classes=(), **kwargs):
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["priority_class"]).choices = [
            ("", "— from the pods or the namespace —")
        ] + [(c.name, f"{c.name} ({c.value})") for c in priority_classes]
        cast(forms.ChoiceField, self.fields["namespace"]).choices = [("", "— from the manifest —")] + [
            (n, n) for n in namespaces
        ]
        self.fields["start_by"].help_text = f"Cancelled if still queued then ({timezone.get_current_timezone_name()})."
        self.manifest_problems: list[FieldProblem] = []

    def clean_max_run_time(self) -> float | None:
        text = self.cleaned_data["max_run_time"].strip()
        if not text:
            return None
        seconds = parse_duration(text)
        if seconds is None:
            raise forms.ValidationError(f'"{text}" is not a duration: use 90m, 12h or 2d')
        return seconds

    def options(self) -> dict[str, Any]:
        """The workflow options given, as the API's fields (Submission.options)."""
        data, options = self.cleaned_data, {}
        retry: dict[str, Any] = {}
        if data["after"].strip():
            options["after"] = data["after"]
        if data["retry_limit"] is not None:
            retry["limit"] = data["retry_limit"]
        if data["retry_on"]:
            retry["on"] = list(data["retry_on"])
        if data["retry_exit_codes"].strip():
            retry["exit_codes"] = data["retry_exit_codes"]
        if retry:
            options["retry"] = retry
        if data["max_run_time"] is not None:
            options["max_run_seconds"] = data["max_run_time"]
        if data["start_by"] is not None:
            options["start_by"] = data["start_by"].isoformat()
        if data["keep_if_never_satisfied"]:
            options["keep_if_never_satisfied"] = True
        for name in ("checkpoint_every", "checkpoint_on_notice", "min_runtime"):
            if data[name].strip():
                options[name] = data[name].strip()
        return options

    def submit(self, *, user, source: str) -> Job | Workflow | None:
        """Submit a valid form: one job (job_submit), an array of it (array_submit), or the
        workflow its manifest declares (workflow_submit). On refusal return None and keep the
        reasons, each beside its field: the manifest's problems (with paths) beside the YAML."""
        try:
            return self._submit(user, source)
        except InvalidInput as error:
            for problem in error.problems:
                field = _FIELD_OF_PATH.get(_ITEM.sub("", _DOCUMENT.sub("", problem.path)))
                if field is None:
                    self.manifest_problems.append(problem)
                elif problem.message not in self.errors.get(field, []):  # (an array's jobs repeat it)
                    self.add_error(field, problem.message)
        except JobdashError as error:
            self.add_error(None, error.message)
        return None

    def _submit(self, user, source: str) -> Job | Workflow:
        data = self.cleaned_data
        one = services.Submission(
            data["manifest"],
            data["priority"] or 0,
            data["priority_class"],
            data["namespace"] or None,
            self.options(),
        )
        documents = _documents(data["manifest"])
        declared = workflows.header(documents[0]) if documents else None
        array = data["array"].strip()
        if array and (len(documents) > 1 or declared):
            raise InvalidInput.at("array", workflows.ARRAY_OF_ONE)
        if len(documents) > 1 and declared is None:
            raise InvalidInput.at("", workflows.several_documents(len(documents)))
        if array:
            return workflows.array_submit(user=user, submission=one, spec=array, source=source)[0]
        if declared is not None:
            if len(documents) < 2:
                raise InvalidInput.at("", workflows.NO_JOBS)
            name, concurrency = declared
            jobs = [
                services.Submission(text, one.priority, one.priority_class, one.namespace, one.options)
                for text in documents[1:]
            ]
            return workflows.workflow_submit(
                user=user, name=name, submissions=jobs, source=source, concurrency=concurrency, first_document=1
            )[0]
        return services.job_submit(
            user=user,
            manifest=one.manifest,
            source=source,
            priority=one.priority,
            priority_class=one.priority_class,
            namespace=one.namespace,
            options=one.options,
        )


def _documents(manifest: str) -> list[str]:
    """The documents of the pasted text; none when it does not parse (job_submit then says why)."""
    try:
        return services.yaml_documents(manifest)
    except InvalidInput:
        return []


class ReasonForm(forms.Form):
    """An optional reason, for the timeline: cancel and requeue ask for one."""

    reason = forms.CharField(required=False, max_length=500)


class PriorityForm(forms.Form):
    priority = forms.IntegerField(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX)
