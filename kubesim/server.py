"""HTTP transport for the simulated API server (stdlib, HTTP/1.1 keep-alive).

Routes the Kubernetes REST paths onto ``Api``: bearer token -> user (401 otherwise),
verbs from method + path + ``?watch``, query parameters, JSON bodies, Status bodies for
errors, and watch streams as newline-delimited JSON in chunked transfer encoding.
Which handler a request goes to is routes.py's; under ``/kubesim/`` sits an
unauthenticated control plane (control.py) for tests run against a separate process.
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from . import control, jsoncodec, openapi, openapi_proto
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
from .resources import ResourceType
from .routes import REVIEWS, SUBRESOURCE_VERBS, TRUE, Call, route, verb
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
        if self.server.cluster.cut.is_set() and not self.path.startswith("/kubesim/"):
            self.close_connection = True  # cut off: no answer at all (Cluster.cut_off)
            return
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
        if path.startswith("/kubesim/"):
            return self._control(method, path)
        if path in ("/healthz", "/readyz", "/livez"):
            return self._send(200, b"ok")
        if path == "/version":
            return self._send(200, VERSION)
        user = self._user()
        if method == "GET" and (doc := discovery(path)) is not None:
            return self._send(200, doc)
        if method == "GET" and path.startswith("/openapi/"):
            return self._openapi(path)
        if method == "POST" and (review := REVIEWS.get(path)) is not None:
            return self._send(201, getattr(self.server.cluster.authorizer, review)(user, self._body()))
        return self._resource(method, path, query, user)

    def _user(self) -> UserInfo:
        """The bearer token's user (401 without one the cluster knows), or whom it impersonates."""
        auth = self.headers.get("Authorization") or ""
        user = self.server.cluster.authenticate(auth[7:].strip() if auth.startswith("Bearer ") else None)
        if user is None:
            raise unauthorized()
        if self.headers.get("Impersonate-User"):
            user = self._impersonate(user)
        return user

    def _resource(self, method: str, path: str, query: dict, user: UserInfo) -> None:
        """A request on a resource: authorized (RBAC, then the faults injected), then handled by
        its subresource's handler, else by its verb's."""
        found = route(path)
        if found is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rt, namespace, name, subresource = found
        call = Call(rt, namespace, name, subresource, verb(method, name, query, subresource), query, user)
        cluster = self.server.cluster
        if cluster.authorizer.enabled:
            cluster.authorizer.authorize(user, call.verb, rt.group, rt.plural, subresource, namespace or "", name or "")
        delay, error = cluster.faults.check(call.verb, rt.plural)
        if delay:
            time.sleep(delay)
        if error is not None:
            raise error
        if subresource in SUBRESOURCE_VERBS:
            if call.verb != SUBRESOURCE_VERBS[subresource]:
                raise method_not_allowed()
            return _SUBRESOURCES[subresource](self, call)
        handler = _VERBS.get(call.verb)
        if handler is None:
            raise method_not_allowed()
        return handler(self, call)

    # --- one handler per subresource and verb (the tables below the class) ------------------

    def _log(self, call: Call) -> None:
        pod = self.server.cluster.api.get(call.rt, call.namespace or "", call.name or "")
        self._send(200, pod_log(pod, call.query), media="text/plain")

    def _evict(self, call: Call) -> None:
        api = self.server.cluster.api
        self._send(201, evict(api, call.namespace or "", call.name or "", self._body(), call.dry_run))

    def _as_table(self) -> bool:
        return wants_table(self.headers.get("Accept") or "")

    def _watch_call(self, call: Call) -> None:
        include = call.query.get("includeObject", "Metadata") if self._as_table() else None
        self._watch(call.rt, call.namespace, call.name, call.query, include)

    def _list(self, call: Call) -> None:
        query = call.query
        result = self.server.cluster.api.list(
            call.rt,
            call.namespace,
            query.get("labelSelector"),
            query.get("fieldSelector"),
            _number(query, "limit", int) or 0,
            query.get("continue") or None,
        )
        if self._as_table():
            result = self._table(call.rt, result["items"], result["metadata"], query)
        self._send(200, result)

    def _get(self, call: Call) -> None:
        obj = self.server.cluster.api.get(call.rt, call.namespace or "", call.object_name)
        if self._as_table():
            obj = self._table(call.rt, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}, call.query)
        self._send(200, obj)

    def _manager(self, query: dict) -> str:
        """The field manager of a write: ?fieldManager, else the client's name (as the API server)."""
        return query.get("fieldManager") or (self.headers.get("User-Agent") or "unknown").split("/")[0][:128]

    def _written(self, call: Call) -> object:
        """A create's or update's body: validated as ?fieldValidation asks (its warnings kept
        for the reply), its fields' managers tracked unless it writes a subresource."""
        body = self._body()
        self._warnings = self._field_validation(call.rt, call.verb, body, call.query)
        if call.subresource:
            return body
        api, manager = self.server.cluster.api, self._manager(call.query)
        return track(api, call.rt, call.namespace or "", call.name, call.verb, body, "", manager)

    def _create(self, call: Call) -> None:
        body = self._written(call)
        obj, warnings = self.server.cluster.api.create(call.rt, call.namespace or "", body, call.user, call.dry_run)
        self._send(201, obj, _warning_headers(self._warnings + warnings))

    def _update(self, call: Call) -> None:
        body = self._written(call)
        obj, warnings = self.server.cluster.api.replace(
            call.rt, call.namespace or "", call.object_name, body, call.user, call.dry_run, call.subresource
        )
        self._send(200, obj, _warning_headers(self._warnings + warnings))

    def _patch(self, call: Call) -> None:
        """A server-side apply, or a JSON, merge or strategic merge patch."""
        rt, namespace, name, api = call.rt, call.namespace or "", call.object_name, self.server.cluster.api
        self._warnings = self._field_validation(rt, call.verb, None, call.query)
        manager = self._manager(call.query)
        content_type = self.headers.get("Content-Type") or ""
        if content_type.split(";")[0].strip().lower() == APPLY_PATCH:
            code, obj, warnings = server_side_apply(
                api, rt, namespace, name, self._raw, call.query, call.user, call.dry_run, call.subresource
            )
            return self._send(code, obj, _warning_headers(self._warnings + warnings))
        patch = self._body()
        if not call.subresource:
            patch = track(api, rt, namespace, name, call.verb, patch, content_type, manager)
        obj, warnings = api.patch(rt, namespace, name, content_type, patch, call.user, call.dry_run, call.subresource)
        return self._send(200, obj, _warning_headers(self._warnings + warnings))

    def _delete(self, call: Call) -> None:
        options = self._body_object()
        if "propagationPolicy" in call.query:
            options["propagationPolicy"] = call.query["propagationPolicy"]
        api = self.server.cluster.api
        self._send(200, api.delete(call.rt, call.namespace or "", call.object_name, options, call.dry_run, call.user))

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
            query.get("allowWatchBookmarks") in TRUE,
            self.server.cluster.config.bookmark_interval_seconds,
            query.get("sendInitialEvents") in TRUE,
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

    def _control(self, method: str, path: str) -> None:
        # The body is read before the endpoint is looked up: a bad one is a 400 anywhere.
        body = self._body_object() if method in ("POST", "PUT") else {}
        self._send(200, control.answer(self.server.cluster, self.server.errors, method, path, body))


# What handles a request on a resource: its subresource's handler (routes.SUBRESOURCE_VERBS
# says which verb each serves), else its verb's.
_SUBRESOURCES: dict[str, Callable[[Handler, Call], None]] = {"log": Handler._log, "eviction": Handler._evict}
_VERBS: dict[str, Callable[[Handler, Call], None]] = {
    "watch": Handler._watch_call,
    "list": Handler._list,
    "get": Handler._get,
    "create": Handler._create,
    "update": Handler._update,
    "patch": Handler._patch,
    "delete": Handler._delete,
}


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
