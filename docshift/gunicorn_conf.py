"""gunicorn's settings for the web process, one place for the Procfile, the systemd unit and
the tests: ``gunicorn -c python:docshift.gunicorn_conf 'app:create_app()'``.

gevent workers: every connection waits for its request in a greenlet, not in one of a
few threads, so clients that send half a request and stall hold a socket each, never the
API (with gthread, 16 such clients left /healthz unanswered). A request's headers must
arrive within ``keepalive`` seconds; its body may pause at most ``DOCSHIFT_READ_TIMEOUT``
seconds (the app sets that on the socket), and must arrive whole within
``DOCSHIFT_REQUEST_SECONDS`` (the app reads it under a gevent timeout), so a client trickling
a byte now and then holds a connection a minute at most, not for ever. Nothing in a request
holds a SQLite transaction across network I/O, so greenlets never wait on each other's locks.

It lives outside ``docshift.web`` so that gunicorn's master, which reads it, imports nothing
of the app: gevent must patch ``ssl`` before urllib3 is first imported.

Listening beyond loopback (a PaaS's ``PORT``, or a ``--bind`` of the operator's), the web
starts only with ``DOCSHIFT_METRICS_TOKEN`` set: ``/metrics`` must not be open to anyone.
"""

import ipaddress
import os
import sys
from typing import Any

# a PaaS says where to listen with PORT; otherwise loopback, as make run and the systemd unit want
_paas_port = os.environ.get("PORT")
bind = [f"0.0.0.0:{_paas_port}" if _paas_port else f"127.0.0.1:{os.environ.get('DOCSHIFT_PORT', '8000')}"]
workers = 2
worker_class = "docshift.gunicorn_worker.ProblemWorker"  # gevent's, gunicorn's refusals in problem+json
logger_class = "docshift.gunicorn_worker.JsonLogger"  # gunicorn's own log lines in JSON, as the app's
worker_connections = 1000
keepalive = 5
control_socket_disable = True


def on_starting(server: Any) -> None:  # gunicorn's Arbiter
    """Refuse to start on a setting that cannot work, in one line as the worker does (else each worker fails to
    load the app, with a traceback, and gunicorn's master halts with two more); and when a listener is reachable
    beyond loopback and /metrics has no token."""
    from docshift import settings  # reads the environment only: nothing of the app, no urllib3
    from docshift.errors import BadSetting

    try:
        settings.load()
    except BadSetting as error:
        sys.exit(f"docshift: {error}")
    exposed = [address for address in server.cfg.bind if not _loopback(address)]
    if exposed and not os.environ.get("DOCSHIFT_METRICS_TOKEN"):
        raise RuntimeError(f"docshift web listens on {', '.join(exposed)}, beyond loopback: set "
                           "DOCSHIFT_METRICS_TOKEN, which /metrics then asks for, or bind 127.0.0.1")


def _loopback(address: str) -> bool:
    if address.startswith("unix:"):
        return True
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name or an inherited fd://: may be anything
        return False
