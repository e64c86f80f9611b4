"""Dynamic admission: calling Mutating/ValidatingWebhookConfigurations like kube-apiserver.

For each matching webhook (rules, namespaceSelector, objectSelector) kubesim POSTs an
AdmissionReview v1 carrying the caller's userInfo and the dryRun flag, applies the
returned JSONPatch (mutating webhooks only), and turns ``allowed: false`` into the
error the client sees ('admission webhook "x" denied the request: ...'). A webhook that
cannot be called (refused, timed out after timeoutSeconds, bad answer) is skipped under
``failurePolicy: Ignore`` and fails the request with 500 under ``Fail``.

Over https kubesim verifies the webhook against its ``caBundle`` and presents the client
certificate its AdmissionConfiguration names for that host (``webhook_clients.py``), as
kube-apiserver does with ``--admission-control-config-file``.

Deviations, on purpose: plain http:// URLs are accepted (the API server demands https)
so that tests can do without certificates; ``service`` references resolve through the
``services`` map of the config; matchConditions and reinvocation are not evaluated.

DELETE of a namespaced object is admitted too (``admit_delete``): the review's ``object``
is null and ``oldObject`` the stored object; a denial refuses the delete, and a patch is
ignored (there is nothing to patch).
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import ApiError, internal
from .patch import PatchError, json_patch
from .resources import MUTATING, NAMESPACES, VALIDATING, ResourceType
from .selectors import match_label_selector_object
from .webhook_clients import ClientCredentials, tls_context


@dataclass(frozen=True)
class UserInfo:
    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""

    def as_dict(self) -> dict:
        info = {"username": self.username, "groups": list(self.groups)}
        if self.uid:
            info["uid"] = self.uid
        return info


class WebhookCallError(Exception):
    pass


def _rule_matches(rule: dict, operation: str, rt: ResourceType, subresource: str) -> bool:
    def has(values: list | None, value: str) -> bool:
        if not values:
            return False
        return "*" in values or value in values

    resource = f"{rt.plural}/{subresource}" if subresource else rt.plural
    resources = rule.get("resources") or []
    resource_ok = (
        resource in resources
        or "*/*" in resources
        or (not subresource and "*" in resources)
        or (bool(subresource) and f"*/{subresource}" in resources)
    )
    scope = rule.get("scope", "*")
    scope_ok = scope == "*" or scope == ("Namespaced" if rt.namespaced else "Cluster")
    return (
        has(rule.get("operations"), operation)
        and has(rule.get("apiGroups"), rt.group)
        and has(rule.get("apiVersions"), rt.version)
        and resource_ok
        and scope_ok
    )


class Admission:
    def __init__(self, store, services: dict[str, str] | None = None, credentials: ClientCredentials | None = None):
        self.store = store
        self.services = dict(services or {})
        self.credentials = credentials or ClientCredentials()
        self._contexts: dict[tuple, ssl.SSLContext] = {}
        self.calls: list[dict] = []  # every webhook call made, for tests to inspect

    def _webhooks(self, rt: ResourceType) -> list[tuple[dict, str]]:
        found = []
        for config in sorted(self.store.items(rt), key=lambda c: c["metadata"]["name"]):
            for hook in config.get("webhooks") or []:
                found.append((hook, config["metadata"]["name"]))
        return found

    def _matches(
        self, hook: dict, operation: str, rt: ResourceType, subresource: str, obj: dict | None, old: dict | None
    ) -> bool:
        if not any(_rule_matches(rule, operation, rt, subresource) for rule in hook.get("rules") or []):
            return False
        labels_new = ((obj or {}).get("metadata") or {}).get("labels") or {}
        labels_old = ((old or {}).get("metadata") or {}).get("labels") or {}
        selector = hook.get("objectSelector")
        if not (
            (obj is not None and match_label_selector_object(selector, labels_new))
            or (old is not None and match_label_selector_object(selector, labels_old))
        ):
            return False
        if rt.namespaced and hook.get("namespaceSelector"):
            namespace = self.store.find(NAMESPACES, "", (obj or old or {})["metadata"].get("namespace", ""))
            ns_labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
            if not match_label_selector_object(hook["namespaceSelector"], ns_labels):
                return False
        return True

    def admit(
        self,
        operation: str,
        rt: ResourceType,
        obj: dict,
        old: dict | None,
        user: UserInfo,
        dry_run: bool,
        subresource: str = "",
        validate=None,
    ) -> tuple[dict, list[str]]:
        """Run mutating then validating webhooks; return the (possibly patched) object and warnings."""
        warnings: list[str] = []
        for config_rt in (MUTATING, VALIDATING):
            for hook, _config in self._webhooks(config_rt):
                if not self._matches(hook, operation, rt, subresource, obj, old):
                    continue
                response = self._call(hook, operation, rt, subresource, obj, old, user, dry_run)
                if response is None:  # failurePolicy Ignore swallowed a call failure
                    continue
                warnings.extend(response.get("warnings") or [])
                if not response.get("allowed"):
                    raise _denied(hook["name"], response.get("status"))
                if config_rt is MUTATING and response.get("patch"):
                    obj = self._apply(hook, obj, response)
                    if validate is not None:
                        validate(obj)
        return obj, warnings

    def admit_delete(self, rt: ResourceType, old: dict, user: UserInfo, dry_run: bool) -> list[str]:
        """Run the webhooks whose rules match DELETE (mutating, then validating) with the
        stored object as oldObject and a null object; a denial raises. Returns the warnings."""
        warnings: list[str] = []
        for config_rt in (MUTATING, VALIDATING):
            for hook, _config in self._webhooks(config_rt):
                if not self._matches(hook, "DELETE", rt, "", None, old):
                    continue
                response = self._call(hook, "DELETE", rt, "", None, old, user, dry_run)
                if response is None:  # failurePolicy Ignore swallowed a call failure
                    continue
                warnings.extend(response.get("warnings") or [])
                if not response.get("allowed"):
                    raise _denied(hook["name"], response.get("status"))
        return warnings

    def _apply(self, hook: dict, obj: dict, response: dict) -> dict:
        if response.get("patchType", "JSONPatch") != "JSONPatch":
            raise internal(
                f'admission webhook "{hook["name"]}" returned an unsupported patchType {response.get("patchType")!r}'
            )
        try:
            operations = json.loads(base64.b64decode(response["patch"]))
            patched = json_patch(obj, operations)
        except (ValueError, PatchError) as exc:
            raise internal(f'admission webhook "{hook["name"]}" returned an invalid patch: {exc}') from None
        if not isinstance(patched, dict):
            raise internal(f'admission webhook "{hook["name"]}" patched the object into a non-object')
        return patched

    def _url(self, hook: dict) -> tuple[str, str]:
        """The URL to post to and the host:port the API server knows the webhook by (the
        key of its client credentials)."""
        client = hook.get("clientConfig") or {}
        if client.get("url"):
            parts = urlsplit(client["url"])
            default = 443 if parts.scheme == "https" else 80
            return client["url"], f"{parts.hostname}:{parts.port or default}"
        service = client["service"]
        key = f"{service.get('namespace')}/{service.get('name')}"
        base = self.services.get(key)
        if base is None:
            raise WebhookCallError(f'service "{key}" not found (add it to the kubesim config\'s services map)')
        host = f"{service.get('name')}.{service.get('namespace')}.svc:{service.get('port') or 443}"
        return base.rstrip("/") + (service.get("path") or ""), host

    def _tls(self, hook: dict, host: str) -> ssl.SSLContext:
        bundle = (hook.get("clientConfig") or {}).get("caBundle")
        certificate = self.credentials.for_host(host)
        key = (bundle, certificate)
        if key not in self._contexts:
            self._contexts[key] = tls_context(bundle, certificate)
        return self._contexts[key]

    def _call(self, hook, operation, rt, subresource, obj, old, user: UserInfo, dry_run) -> dict | None:
        uid = str(uuid.uuid4())
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        gvr = {"group": rt.group, "version": rt.version, "resource": rt.plural}
        options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[operation]
        review: dict = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": gvk,
                "resource": gvr,
                "requestKind": gvk,
                "requestResource": gvr,
                **({"subResource": subresource} if subresource else {}),
                "name": ((obj or old or {}).get("metadata") or {}).get("name", ""),
                "namespace": ((obj or old or {}).get("metadata") or {}).get("namespace", ""),
                "operation": operation,
                "userInfo": user.as_dict(),
                "object": obj,
                "oldObject": old,
                "dryRun": dry_run,
                "options": {
                    "kind": options_kind,
                    "apiVersion": "meta.k8s.io/v1",
                    **({"dryRun": ["All"]} if dry_run else {}),
                },
            },
        }
        url = "<unresolved>"
        record = {
            "webhook": hook["name"],
            "operation": operation,
            "user": user.username,
            "dry_run": dry_run,
            "name": review["request"]["name"],
            "namespace": review["request"]["namespace"],
        }
        try:
            url, host = self._url(hook)
            context = self._tls(hook, host) if url.startswith("https://") else None
            response = self._post(url, review, hook, context)
            if response.get("uid") != uid:
                raise WebhookCallError(f"expected response.uid={uid!r}, got {response.get('uid')!r}")
            record["allowed"] = bool(response.get("allowed"))
            self.calls.append(record)
            return response
        except WebhookCallError as exc:
            record["error"] = str(exc)
            self.calls.append(record)
            if hook.get("failurePolicy", "Fail") == "Ignore":
                return None
            raise internal(
                f'failed calling webhook "{hook["name"]}": failed to call webhook: Post "{url}": {exc}'
            ) from None

    def _post(self, url: str, review: dict, hook: dict, context: ssl.SSLContext | None) -> dict:
        data = json.dumps(review).encode()
        request = urllib.request.Request(
            url, data=data, method="POST", headers={"Content-Type": "application/json", "Accept": "application/json"}
        )
        timeout = hook.get("timeoutSeconds", 10)
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=context) as reply:
                payload = json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            raise WebhookCallError(f"the server responded with status {exc.code}") from None
        except TimeoutError:
            raise WebhookCallError("context deadline exceeded") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                raise WebhookCallError("context deadline exceeded") from None
            raise WebhookCallError(str(reason)) from None
        if not isinstance(payload, dict) or not isinstance(payload.get("response"), dict):
            raise WebhookCallError("the response is not an AdmissionReview with a response")
        return payload["response"]


def _denied(name: str, status: dict | None) -> ApiError:
    """webhookerrors.ToStatusErr: at least 400, 'admission webhook "x" denied the request: msg'."""
    status = dict(status or {})
    code = status.get("code") or 400
    code = 400 if code < 400 else code
    denied_by = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied_by}: {status['reason']}"
    else:
        message = f"{denied_by} without explanation"
    return ApiError(code, status.get("reason") or "", message, status.get("details"))
