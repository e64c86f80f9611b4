"""The webhook's listener in-process (tests; the embedded stack): the same WSGI application
as production's gunicorn (webhooks/wsgi.py), on a TLS socket whose handshake requires a
client certificate issued by ``client_ca``, the way gunicorn's ``--cert-reqs 2
--ca-certs`` and controller-runtime's ``RequireAndVerifyClientCert`` do. A caller without
such a certificate never reaches Django: nothing is read, decided or stored for it.
"""

from __future__ import annotations

import logging
import ssl
import threading

from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

from .wsgi import WebhookHandler

log = logging.getLogger(__name__)
HANDSHAKE_TIMEOUT_SECONDS = 10.0


def server_context(certfile: str, keyfile: str, client_ca: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certfile, keyfile)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cafile=client_ca)
    return context


class _TLSServer(ThreadedWSGIServer):
    def __init__(self, address, context: ssl.SSLContext):
        self.context = context
        self.refused: list[str] = []  # why each refused handshake failed, for tests and logs
        super().__init__(address, _QuietHandler)

    def get_request(self):
        sock, address = self.socket.accept()
        # The handshake runs in the request's thread: a silent client must not stall accepts.
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def finish_request(self, request, client_address):
        try:
            request.settimeout(HANDSHAKE_TIMEOUT_SECONDS)
            request.do_handshake()
            request.settimeout(None)
        except (ssl.SSLError, OSError) as error:
            reason = getattr(error, "reason", None) or str(error)
            self.refused.append(reason)
            log.info("webhook listener: refused %s: %s", client_address[0], reason)
            return
        super().finish_request(request, client_address)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # the API server calls for every create: no access log
        pass


class WebhookListener:
    def __init__(self, certfile: str, keyfile: str, client_ca: str, host: str = "127.0.0.1", port: int = 0):
        self.server = _TLSServer((host, port), server_context(certfile, keyfile, client_ca))
        self.server.set_app(WebhookHandler())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"https://{host!s}:{port}"

    @property
    def refused(self) -> list[str]:
        return self.server.refused

    def start(self) -> WebhookListener:
        self._thread = threading.Thread(target=self.server.serve_forever, name="webhook-listener", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> WebhookListener:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
