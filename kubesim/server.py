"""HTTP transport for the simulated API server (stdlib, HTTP/1.1 keep-alive).

Routes the Kubernetes REST paths onto ``Api``: bearer token -> user (401 otherwise),
verbs from method + path + ``?watch``, query parameters, JSON bodies, Status bodies for
errors, and watch streams as newline-delimited JSON in chunked transfer encoding.
Under ``/kubesim/`` sits an unauthenticated control plane for tests run against a
separate process: faults, dropping watches, compaction, the job create audit, and
advancing a manual clock.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .cluster import Cluster
from .errors import ApiError, bad_request, internal, method_not_allowed, unauthorized
from .resources import ALL, BY_GROUP_PLURAL, ResourceType

VERSION = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.0-kubesim",
    "gitCommit": "kubesim",
    "gitTreeState": "clean",
    "buildDate": "2024-01-01T00:00:00Z",
    "goVersion": "go1.22",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_TRUE = ("true", "1", "True")


def _route(path: str) -> tuple[ResourceType, str | None, str | None, str] | None:
    """Map a REST path to (resource type, namespace, name, subresource)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    rt = BY_GROUP_PLURAL.get((group, rest[0]))
    if rt is None or (namespace is not None and not rt.namespaced):
        return None
    version = parts[2] if group else "v1"
    if version != rt.version:
        return None
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3 or (subresource and subresource != "status"):
        return None
    if rt.namespaced and name is not None and namespace is None:
        return None
    return rt, namespace, name, subresource


def _version_priority(version: str) -> tuple:
    """Kubernetes version priority: GA before beta before alpha, higher numbers first."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (3, 0, 0, version)
    level = {None: 0, "beta": 1, "alpha": 2}[match.group(2)]
    return (level, -int(match.group(1)), -int(match.group(3) or 0), version)


def _group_versions() -> dict[str, list[str]]:
    versions: dict[str, list[str]] = {}
    for rt in ALL:
        if rt.group and rt.version not in versions.setdefault(rt.group, []):
            versions[rt.group].append(rt.version)
    return {g: sorted(v, key=_version_priority) for g, v in sorted(versions.items())}


def _api_group(group: str, versions: list[str]) -> dict:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}


def _resource_list(group_version: str, group: str, version: str) -> dict:
    resources: list[dict] = []
    for rt in ALL:
        if rt.group != group or rt.version != version:
            continue
        resources.append(
            {
                "name": rt.plural,
                "singularName": rt.kind.lower(),
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            }
        )
        if rt.status_subresource:
            resources.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _discovery(path: str) -> dict | None:
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }
    if path == "/api/v1":
        return _resource_list("v1", "", "v1")
    groups = _group_versions()
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_api_group(g, v) for g, v in groups.items()]}
    parts = path.split("/")
    if len(parts) == 3 and parts[1] == "apis" and parts[2] in groups:
        return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(parts[2], groups[parts[2]])}
    if len(parts) == 4 and parts[1] == "apis" and parts[3] in groups.get(parts[2], ()):
        return _resource_list(f"{parts[2]}/{parts[3]}", parts[2], parts[3])
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small JSON replies must not wait for delayed ACKs
    server_version = "kubesim"
    server: KubesimServer

    def log_message(self, format: str, *args) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # --- plumbing ---------------------------------------------------------------------------

    def _body(self) -> object:
        if not self._raw:
            return None
        try:
            return json.loads(self._raw)
        except ValueError:
            raise bad_request("the body of the request could not be decoded as JSON") from None

    def _body_object(self) -> dict:
        """A body that must be a JSON object (DeleteOptions, control requests); none is {}."""
        body = self._body() or {}
        if not isinstance(body, dict):
            raise bad_request(f"the body of the request must be a JSON object, not {type(body).__name__}")
        return body

    def _send(self, code: int, payload: object, headers: dict | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload, separators=(",", ":")).encode()
        head = [
            f"HTTP/1.1 {code} {self.responses.get(code, ('',))[0]}",
            "Content-Type: application/json",
            f"Content-Length: {len(data)}",
        ]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)  # one write per reply
        self.log_request(code, len(data))

    def _handle(self, method: str) -> None:
        # Read the whole body first, whatever the outcome: leftover bytes on a kept-alive
        # connection would be parsed as the next request.
        length = int(self.headers.get("Content-Length") or 0)
        self._raw = self.rfile.read(length) if length else b""
        try:
            self._dispatch(method)
        except ApiError as exc:
            self._send(exc.code, exc.status(), exc.headers)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except Exception as exc:  # a bug in kubesim: answer like an API server would, keep serving
            self.server.errors.append(repr(exc))
            self._send(500, internal(repr(exc)).status())

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        cluster = self.server.cluster
        if path.startswith("/kubesim/"):
            return self._control(method, path, query)
        if path in ("/healthz", "/readyz", "/livez"):
            return self._send(200, b"ok")
        if path == "/version":
            return self._send(200, VERSION)
        auth = self.headers.get("Authorization") or ""
        user = cluster.authenticate(auth[7:].strip() if auth.startswith("Bearer ") else None)
        if user is None:
            raise unauthorized()
        if method == "GET" and (doc := _discovery(path)) is not None:
            return self._send(200, doc)
        route = _route(path)
        if route is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rt, namespace, name, subresource = route
        verb = self._verb(method, name, query)
        delay, error = cluster.faults.check(verb, rt.plural)
        if delay:
            time.sleep(delay)
        if error is not None:
            raise error
        dry_run = query.get("dryRun") == "All"
        api = cluster.api
        if verb == "watch":
            return self._watch(rt, namespace, name, query)
        if verb == "list":
            return self._send(
                200,
                api.list(
                    rt,
                    namespace,
                    query.get("labelSelector"),
                    query.get("fieldSelector"),
                    _number(query, "limit", int) or 0,
                    query.get("continue") or None,
                ),
            )
        if verb == "create":
            obj, warnings = api.create(rt, namespace or "", self._body(), user, dry_run)
            return self._send(201, obj, _warning_headers(warnings))
        # _verb gives the verbs below only to a named object.
        assert name is not None
        if verb == "get":
            return self._send(200, api.get(rt, namespace or "", name))
        if verb == "update":
            obj, warnings = api.replace(rt, namespace or "", name, self._body(), user, dry_run, subresource)
            return self._send(200, obj, _warning_headers(warnings))
        if verb == "patch":
            content_type = self.headers.get("Content-Type") or ""
            obj, warnings = api.patch(rt, namespace or "", name, content_type, self._body(), user, dry_run, subresource)
            return self._send(200, obj, _warning_headers(warnings))
        if verb == "delete":
            options = self._body_object()
            if "propagationPolicy" in query:
                options["propagationPolicy"] = query["propagationPolicy"]
            return self._send(200, api.delete(rt, namespace or "", name, options, dry_run, user))
        raise method_not_allowed()

    @staticmethod
    def _verb(method: str, name: str | None, query: dict) -> str:
        if method == "GET":
            if query.get("watch") in _TRUE:
                return "watch"
            return "get" if name else "list"
        if name is None:
            if method == "POST":
                return "create"
            raise method_not_allowed()
        return {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method) or "unsupported"

    def _watch(self, rt: ResourceType, namespace: str | None, name: str | None, query: dict) -> None:
        field_selector = query.get("fieldSelector")
        if name:  # GET .../pods/x?watch=true watches a single object
            field_selector = ",".join(filter(None, [field_selector, f"metadata.name={name}"]))
        timeout = _number(query, "timeoutSeconds", float)
        stream = self.server.cluster.api.watch(
            rt,
            namespace,
            query.get("resourceVersion"),
            query.get("labelSelector"),
            field_selector,
            timeout,
            query.get("allowWatchBookmarks") in _TRUE,
            self.server.cluster.config.bookmark_interval_seconds,
        )
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        self.server.watch_started()
        try:
            for line in stream:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.write(b"0\r\n\r\n")
        except ConnectionAbortedError:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        finally:
            if hasattr(stream, "close"):
                stream.close()  # unregisters the watcher even if the client went away

    def _control(self, method: str, path: str, query: dict) -> None:
        cluster = self.server.cluster
        body = self._body_object() if method in ("POST", "PUT") else {}
        if path == "/kubesim/audit" and method == "GET":
            return self._send(200, {"items": list(cluster.audit)})
        if path == "/kubesim/faults" and method == "POST":
            cluster.faults.add(**body)
            return self._send(200, {"rules": len(cluster.faults.rules)})
        if path == "/kubesim/faults" and method == "DELETE":
            cluster.faults.clear()
            return self._send(200, {"rules": 0})
        if path == "/kubesim/drop-watches" and method == "POST":
            return self._send(200, {"dropped": cluster.drop_watches(bool(body.get("abrupt")))})
        if path == "/kubesim/compact" and method == "POST":
            return self._send(200, {"compacted": cluster.store.compact()})
        if path == "/kubesim/advance" and method == "POST":
            if not cluster.clock.manual:
                raise bad_request("advance needs `clock: manual`; a real clock moves by itself")
            cluster.advance(float(body.get("seconds", 0)))
            return self._send(200, {"now": cluster.clock.now()})
        if path == "/kubesim/state" and method == "GET":
            return self._send(
                200,
                {
                    "now": cluster.clock.now(),
                    "resourceVersion": cluster.store.resource_version,
                    "watchers": cluster.store.watcher_count(),
                    "errors": list(self.server.errors),
                },
            )
        raise ApiError(404, "NotFound", f"no kubesim control endpoint {method} {path}")


def _number(query: dict, key: str, kind: type):
    if not query.get(key):
        return None
    try:
        value = kind(query[key])
    except ValueError:
        raise bad_request(f"invalid {key} {query[key]!r}") from None
    if value < 0:
        raise bad_request(f"{key} must not be negative")
    return value


def _warning_headers(warnings: list[str]) -> dict:
    # Several Warning headers would need a list; one joined header is what the client reads anyway.
    return {"Warning": ", ".join(f'299 - "{w}"' for w in warnings)} if warnings else {}


class KubesimServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024  # the default 5 drops SYNs under a burst of new connections

    def __init__(
        self,
        cluster: Cluster,
        host: str = "127.0.0.1",
        port: int = 0,
        verbose: bool = False,
        tls: tuple[str, str] | None = None,
    ):
        """`tls`: (certificate file, key file) to serve HTTPS, as an API server does (kubectl
        sends a bearer token only over HTTPS); plain HTTP without."""
        super().__init__((host, port), Handler)
        self.tls = tls
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.socket = context.wrap_socket(self.socket, server_side=True)
        self.cluster = cluster
        self.verbose = verbose
        self.errors: list[str] = []
        self.watches = 0
        self._thread: threading.Thread | None = None

    def watch_started(self) -> None:
        self.watches += 1

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        # The stub types the address one may bind to (str or bytes); once bound it is getsockname()'s str.
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host}:{port}"  # type: ignore[str-bytes-safe]

    def start_background(self) -> None:
        self._thread = threading.Thread(
            target=self.serve_forever, name="kubesim-http", daemon=True, kwargs={"poll_interval": 0.1}
        )
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.cluster.drop_watches()
