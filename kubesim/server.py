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
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from . import jsoncodec, openapi, openapi_proto
from .admission import UserInfo
from .apply import APPLY_PATCH, server_side_apply, track
from .apply import parse as parse_apply
from .cluster import Cluster
from .discovery import discovery
from .errors import ApiError, bad_request, internal, method_not_allowed, unauthorized
from .nodeops import evict
from .patch import MERGE_TYPES
from .podlogs import pod_log
from .protobuf import PROTOBUF, decode_object
from .resources import BY_GROUP_PLURAL, ResourceType
from .tables import table, wants_table

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
    if len(rest) > 3 or (
        subresource
        and subresource != "status"
        and (subresource, rt.plural) not in (("log", "pods"), ("eviction", "pods"))
    ):
        return None
    if rt.namespaced and name is not None and namespace is None:
        return None
    return rt, namespace, name, subresource


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

    def _protobuf(self) -> bool:
        return (self.headers.get("Content-Type") or "").split(";")[0].strip() == PROTOBUF

    def _body(self) -> object:
        if not self._raw:
            return None
        if self._protobuf():
            return decode_object(self._raw)
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

    def _send(self, code: int, payload: object, headers: dict | None = None, media: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else jsoncodec.dumps(payload)
        head = [
            f"HTTP/1.1 {code} {self.responses.get(code, ('',))[0]}",
            f"Content-Type: {media}",
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
        self._warnings: list[str] = []
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
        if self.headers.get("Impersonate-User"):
            user = self._impersonate(user)
        if method == "GET" and (doc := discovery(path)) is not None:
            return self._send(200, doc)
        if method == "GET" and path.startswith("/openapi/"):
            return self._openapi(path)
        if method == "POST" and path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
            return self._send(201, cluster.authorizer.review(user, self._body()))
        if method == "POST" and path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
            return self._send(201, cluster.authorizer.subject_review(user, self._body()))
        if method == "POST" and path == "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews":
            return self._send(201, cluster.authorizer.rules(user, self._body()))
        route = _route(path)
        if route is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rt, namespace, name, subresource = route
        verb = self._verb(method, name, query, subresource)
        if cluster.authorizer.enabled:
            cluster.authorizer.authorize(user, verb, rt.group, rt.plural, subresource, namespace or "", name or "")
        delay, error = cluster.faults.check(verb, rt.plural)
        if delay:
            time.sleep(delay)
        if error is not None:
            raise error
        if subresource == "log":
            if verb != "get":
                raise method_not_allowed()
            pod = cluster.api.get(rt, namespace or "", name or "")
            return self._send(200, pod_log(pod, query), media="text/plain")
        dry_run = query.get("dryRun") == "All"
        api = cluster.api
        if subresource == "eviction":
            if verb != "create":
                raise method_not_allowed()
            return self._send(201, evict(api, namespace or "", name or "", self._body(), dry_run))
        as_table = wants_table(self.headers.get("Accept") or "")
        if verb == "watch":
            return self._watch(rt, namespace, name, query, query.get("includeObject", "Metadata") if as_table else None)
        if verb == "list":
            result = api.list(
                rt,
                namespace,
                query.get("labelSelector"),
                query.get("fieldSelector"),
                _number(query, "limit", int) or 0,
                query.get("continue") or None,
            )
            if as_table:
                result = self._table(rt, result["items"], result["metadata"], query)
            return self._send(200, result)
        body = self._body() if verb in ("create", "update") else None
        if verb in ("create", "update", "patch"):
            self._warnings = self._field_validation(rt, verb, body, query)
        manager = query.get("fieldManager") or (self.headers.get("User-Agent") or "unknown").split("/")[0][:128]
        if verb in ("create", "update") and not subresource:
            body = track(api, rt, namespace or "", name, verb, body, "", manager)
        if verb == "create":
            obj, warnings = api.create(rt, namespace or "", body, user, dry_run)
            return self._send(201, obj, _warning_headers(self._warnings + warnings))
        # _verb gives the verbs below only to a named object.
        assert name is not None
        if verb == "get":
            obj = api.get(rt, namespace or "", name)
            if as_table:
                obj = self._table(rt, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}, query)
            return self._send(200, obj)
        if verb == "update":
            obj, warnings = api.replace(rt, namespace or "", name, body, user, dry_run, subresource)
            return self._send(200, obj, _warning_headers(self._warnings + warnings))
        if verb == "patch":
            content_type = self.headers.get("Content-Type") or ""
            if content_type.split(";")[0].strip().lower() == APPLY_PATCH:
                code, obj, warnings = server_side_apply(
                    api, rt, namespace or "", name, self._raw, query, user, dry_run, subresource
                )
                return self._send(code, obj, _warning_headers(self._warnings + warnings))
            patch = self._body()
            if not subresource:
                patch = track(api, rt, namespace or "", name, verb, patch, content_type, manager)
            obj, warnings = api.patch(rt, namespace or "", name, content_type, patch, user, dry_run, subresource)
            return self._send(200, obj, _warning_headers(self._warnings + warnings))
        if verb == "delete":
            options = self._body_object()
            if "propagationPolicy" in query:
                options["propagationPolicy"] = query["propagationPolicy"]
            return self._send(200, api.delete(rt, namespace or "", name, options, dry_run, user))
        raise method_not_allowed()

    def _field_validation(self, rt: ResourceType, verb: str, body: object, query: dict) -> list[str]:
        """fieldValidation=Strict refuses fields the kind's schema does not declare, Warn warns
        (kubectl apply asks for Strict). Checked on the body; a JSON patch is not checked."""
        mode = query.get("fieldValidation") or "Ignore"
        if mode not in ("Strict", "Warn", "Ignore"):
            raise bad_request(f'fieldValidation must be one of "Ignore", "Warn" or "Strict", not {mode!r}')
        if mode == "Ignore":
            return []
        if verb == "patch":
            media = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if media == APPLY_PATCH:
                body = parse_apply(self._raw)
            elif media in MERGE_TYPES:
                body = self._body()
            else:
                return []
        unknown = [f'unknown field "{path}"' for path in openapi.unknown_fields(rt, body)]
        if unknown and mode == "Strict":
            raise bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {', '.join(unknown)}"
            )
        return unknown

    def _impersonate(self, user: UserInfo) -> UserInfo:
        """Impersonate-User/-Group (``kubectl --as``), for those RBAC lets impersonate."""
        name = self.headers.get("Impersonate-User") or ""
        groups = tuple(self.headers.get_all("Impersonate-Group") or ())
        authorizer = self.server.cluster.authorizer
        for kind, value in [("users", name)] + [("groups", g) for g in groups]:
            allowed, _ = authorizer.decide(user, {"verb": "impersonate", "group": "", "resource": kind, "name": value})
            if not allowed:
                raise ApiError(
                    403,
                    "Forbidden",
                    f'{kind} "{value}" is forbidden: User "{user.username}" cannot impersonate resource "{kind}" '
                    'in API group "" at the cluster scope',
                )
        return UserInfo(name, (*groups, "system:authenticated"))

    def _openapi(self, path: str) -> None:
        if path == "/openapi/v2":
            accept = self.headers.get("Accept") or "*/*"
            if "json" in accept or "*/*" in accept:
                return self._send(200, openapi.v2_document())
            if openapi_proto.MEDIA in accept:  # what client-go asks for, and kubectl validates with
                return self._send(200, openapi_proto.v2_protobuf(), media=openapi_proto.REPLY_MEDIA)
            raise ApiError(
                406, "NotAcceptable", "the server was unable to respond with a content type that the client supports"
            )
        if path == "/openapi/v3":
            return self._send(200, openapi.v3_root())
        document = openapi.v3_document(path.removeprefix("/openapi/v3/"))
        if document is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return self._send(200, document)

    def _table(self, rt: ResourceType, items: list[dict], meta: dict, query: dict) -> dict:
        now = self.server.cluster.clock.now()
        return table(rt.group, rt.plural, items, now, meta, query.get("includeObject", "Metadata"))

    @staticmethod
    def _verb(method: str, name: str | None, query: dict, path_subresource: str = "") -> str:
        if method == "GET":
            if query.get("watch") in _TRUE:
                return "watch"
            return "get" if name else "list"
        if method == "POST" and (name is None or path_subresource == "eviction"):
            return "create"
        if name is None:
            raise method_not_allowed()
        return {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method) or "unsupported"

    def _watch(
        self, rt: ResourceType, namespace: str | None, name: str | None, query: dict, as_table: str | None
    ) -> None:
        """``as_table``: the includeObject of a Table watch (each event's object a one-row Table)."""
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
            query.get("sendInitialEvents") in _TRUE,
        )
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        self.server.watch_started()
        try:
            for chunk in stream:  # one or more events, each a line
                if as_table is not None:
                    chunk = b"".join(self._table_event(rt, line, as_table) for line in chunk.splitlines())
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
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

    def _table_event(self, rt: ResourceType, line: bytes, include: str) -> bytes:
        event = json.loads(line)
        obj = event.get("object") or {}
        if event.get("type") in ("ADDED", "MODIFIED", "DELETED") and "metadata" in obj:
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            event["object"] = table(rt.group, rt.plural, [obj], self.server.cluster.clock.now(), meta, include)
        return json.dumps(event, separators=(",", ":")).encode() + b"\n"

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
    texts = [w.replace("\\", "\\\\").replace('"', '\\"') for w in warnings]  # a quoted-string (RFC 7234)
    return {"Warning": ", ".join(f'299 - "{t}"' for t in texts)} if warnings else {}


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
        self._tls_context: ssl.SSLContext | None = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            context.set_alpn_protocols(["http/1.1"])
            self._tls_context = context
            # Served over HTTPS, kubesim is for kubectl, whose first request wants OpenAPI.
            threading.Thread(target=openapi.warm, name="kubesim-openapi", daemon=True).start()
        self.cluster = cluster
        self.verbose = verbose
        self.errors: list[str] = []
        self.watches = 0
        self._thread: threading.Thread | None = None

    def finish_request(self, request, client_address) -> None:
        """Runs in the connection's thread: the TLS handshake happens there, so a slow or
        broken client never holds up accepting the next connection."""
        if self._tls_context is None:
            return super().finish_request(request, client_address)
        try:
            conn = self._tls_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return None  # a failed handshake (an HTTP client, an untrusting one): nothing to answer
        try:
            super().finish_request(conn, client_address)
        finally:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def handle_error(self, request, client_address) -> None:
        """A client gone in the middle of a request (a watch whose process stopped, a reset)
        is no fault of the server: the API server logs nothing for it either."""
        if isinstance(sys.exc_info()[1], ssl.SSLError | ConnectionError):
            return
        super().handle_error(request, client_address)

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
