"""Mutating and validating webhook configurations: their validation and the API server's
defaults (admissionregistration.k8s.io/v1), for kubesim/resources.py's types."""

from __future__ import annotations

from .validation import DNS1123_SUBDOMAIN, cause, required


def validate(obj: dict) -> list[dict]:
    causes: list[dict] = []
    hooks = obj.get("webhooks") or []
    if not isinstance(hooks, list):
        return [cause("webhooks", "must be a list")]
    seen = set()
    for i, hook in enumerate(hooks):
        where = f"webhooks[{i}]"
        name = hook.get("name") if isinstance(hook, dict) else None
        if not name:
            causes.append(required(f"{where}.name"))
        elif name.count(".") < 2 or not DNS1123_SUBDOMAIN.match(name):
            causes.append(
                cause(
                    f"{where}.name",
                    f"Invalid value: {name!r}: should be a domain with at least three segments separated by dots",
                )
            )
        elif name in seen:
            causes.append(cause(f"{where}.name", f"Duplicate value: {name!r}", "FieldValueDuplicate"))
        seen.add(name)
        if not isinstance(hook, dict):
            continue
        client = hook.get("clientConfig") or {}
        if bool(client.get("url")) == bool(client.get("service")):
            causes.append(
                cause(f"{where}.clientConfig", "exactly one of url or service is required", "FieldValueRequired")
            )
        if hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            causes.append(
                cause(
                    f"{where}.sideEffects",
                    "Unsupported value: must be one of None, NoneOnDryRun",
                    "FieldValueNotSupported",
                )
            )
        versions = hook.get("admissionReviewVersions") or []
        if "v1" not in versions:
            causes.append(
                cause(
                    f"{where}.admissionReviewVersions",
                    "must include v1 (the only AdmissionReview version kubesim speaks)",
                    "FieldValueRequired",
                )
            )
        if hook.get("failurePolicy", "Fail") not in ("Fail", "Ignore"):
            causes.append(
                cause(f"{where}.failurePolicy", "Unsupported value: must be Fail or Ignore", "FieldValueNotSupported")
            )
        timeout = hook.get("timeoutSeconds", 10)
        if not isinstance(timeout, int) or not 1 <= timeout <= 30:
            causes.append(
                cause(
                    f"{where}.timeoutSeconds",
                    f"Invalid value: {timeout!r}: the timeout value must be between 1 and 30 seconds",
                )
            )
    return causes


def default(obj: dict) -> None:
    mutating = obj.get("kind") == "MutatingWebhookConfiguration"
    for hook in obj.get("webhooks") or []:
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", 10)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or []:
            rule.setdefault("scope", "*")
