"""docshift's web app: API v1, the marketplace registration page, health, metrics, docs,
and the operator CLI.

What every request is held to: it names a host the web is (``TRUSTED_HOSTS``, else a 400),
and its body arrives within ``DOCSHIFT_REQUEST_SECONDS`` (else a 400 and the connection
closed), however it trickles in."""

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import IO, Any
from urllib.parse import urlsplit

from flask import Flask, current_app, request
from flask.typing import ResponseReturnValue

from docshift import settings
from docshift.errors import InvalidRequest
from docshift.storage import connection, liveness, spool
from docshift.storage.connection import Row
from docshift.web import api, cli, metrics, openapi, problems, registration
from docshift.web.context import close_db, get_db, get_settings, get_store
from docshift.web.forms import DocshiftRequest

# the names the web answers to wherever it listens: make run's URL, a published container port
LOOPBACK_HOSTS = ("localhost", "127.0.0.1")
# how often /healthz reads its checks for requests from beyond loopback, however many come
HEALTH_READ_EVERY = 1.0
# a part whose check has not answered in this long is reported as not answering to the requests that do not wait
# for it (a hung store's ping can take minutes: its client's timeouts and retries)
HEALTH_STALLED = 5.0
_health_read = threading.Lock()
_checking: tuple[str, float] | None = None  # the part being checked, since when


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The app, configured by ``settings.load(config)``: defaults, the environment, then ``config``
    (whose keys that name no setting, like ``TESTING``, are Flask's own). The settings are
    ``app.config["DOCSHIFT"]`` (``context.get_settings()``)."""
    app = Flask(__name__)
    app.request_class = _Request
    given = dict(config or {})
    flask_own = {key: given.pop(key) for key in list(given) if key.lower() not in settings.NAMES}
    app.config.update(flask_own)
    app.config["DOCSHIFT"] = configured = settings.load(given)
    # a Host that is none of these is a 400 (werkzeug ignores the port): status_url, Location and the
    # OpenAPI document's server are built from it when DOCSHIFT_BASE_URL is unset
    app.config["TRUSTED_HOSTS"] = trusted_hosts(configured)
    # werkzeug refuses bigger bodies before reading them; the slack is for multipart framing
    app.config["MAX_CONTENT_LENGTH"] = configured.max_upload_bytes + 64 * 1024
    app.config["MAX_FORM_PARTS"] = 16
    app.json.sort_keys = False  # type: ignore[attr-defined]  # Flask's default provider has it
    # "/v1/conversions//x" must not be redirected to another path
    app.url_map.merge_slashes = False
    metrics.init_app(app)
    app.before_request(_bound_body_reads)
    app.wsgi_app = _by_deadline(app, app.wsgi_app)  # type: ignore[method-assign]

    problems.register(app)
    app.register_blueprint(api.bp)
    app.register_blueprint(registration.bp)
    app.register_blueprint(openapi.bp)
    app.teardown_appcontext(close_db)
    app.add_url_rule("/healthz", view_func=healthz)
    cli.register(app)

    conn = connection.connect(configured.database)
    connection.init(conn)
    conn.close()
    return app


def _bound_body_reads() -> None:
    # a client that stops sending its body is refused after READ_TIMEOUT s of silence, instead
    # of holding its connection open for ever (gunicorn's own timeout covers only the headers)
    sock = request.environ.get("gunicorn.socket")
    if sock is not None:
        sock.settimeout(get_settings().read_timeout)


def trusted_hosts(config: settings.Settings) -> list[str]:
    """The hosts the web answers to on any connection: loopback's names, and DOCSHIFT_BASE_URL's."""
    base_host = urlsplit(config.base_url or "").hostname
    return [*LOOPBACK_HOSTS, *([base_host] if base_host else [])]


class _Request(DocshiftRequest):
    """A request whose trusted hosts (``TRUSTED_HOSTS``) also hold the address its connection came
    to: what a client that reaches the web by its IP address (a LAN, a platform's health check) names."""

    _configured_hosts: list[str] | None = None

    @property
    def trusted_hosts(self) -> list[str] | None:
        hosts, sock = self._configured_hosts, self.environ.get("gunicorn.socket")
        if hosts is None or sock is None:
            return hosts
        try:
            local = sock.getsockname()
        except OSError:  # the client is gone
            return hosts
        return [*hosts, local[0]] if isinstance(local, tuple) else hosts

    @trusted_hosts.setter
    def trusted_hosts(self, hosts: list[str] | None) -> None:
        self._configured_hosts = hosts


class _Deadline:
    """A request body (``wsgi.input``) read by a deadline: a read past it, or one still waiting for
    bytes when it comes, raises InvalidRequest (400; no OSError, which werkzeug's body stream would
    take for a client gone). The read timeout bounds each pause only; this bounds the whole body, so
    a client sending a byte now and then cannot hold a connection.

    A body that ends before its Content-Length (the client closed its side), one that stops coming
    for the socket's read timeout, and chunks gunicorn cannot read are InvalidRequest too, saying so.
    gunicorn marks its input terminated, so werkzeug reads it to its end unchecked: a form complete
    before the cut was taken as sent, and a cut one as a form without its file part."""

    def __init__(self, stream: IO[bytes], seconds: float, length: int | None = None) -> None:
        self.stream, self.seconds, self.length, self.received = stream, seconds, length, 0
        self.deadline = time.monotonic() + seconds
        # under gunicorn's gevent workers a read waiting on the socket is interrupted at the deadline
        monkey = sys.modules.get("gevent.monkey")
        self.timeout = sys.modules["gevent"].Timeout if monkey and monkey.is_module_patched("socket") else None

    def read(self, *args: Any) -> bytes:
        return self._whole(self._by_deadline(self.stream.read, *args), args)

    def readline(self, *args: Any) -> bytes:
        return self._whole(self._by_deadline(self.stream.readline, *args), args)

    def readlines(self, *_: Any) -> list[bytes]:
        return list(self)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")

    def _whole(self, data: bytes, args: tuple[Any, ...]) -> bytes:
        self.received += len(data)
        asked = args[0] if args and args[0] is not None else -1
        if not data and asked != 0 and self.length is not None and self.received < self.length:
            raise InvalidRequest(f"The request body was cut off: it ended after {self.received} of the "
                                 f"{self.length} bytes its Content-Length gives. Send it again, whole.")
        return data

    def _by_deadline(self, read: Callable[..., Any], *args: Any) -> Any:
        left = self.deadline - time.monotonic()
        late = InvalidRequest(f"The request did not arrive within {self.seconds:g} seconds; send it again, faster.")
        if left <= 0:
            raise late
        try:
            if self.timeout is None:
                return read(*args)
            with self.timeout(left, late):
                return read(*args)
        except TimeoutError:  # the socket's read timeout: nothing came for that long
            raise InvalidRequest(f"The request body stopped coming after {self.received} bytes; send it "
                                 "again.") from None
        except problems.BROKEN_BODY:  # a chunk gunicorn cannot read, or the connection closed mid-chunk
            raise InvalidRequest(problems.BROKEN) from None


def _by_deadline(app: Flask, wsgi_app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """``wsgi_app`` with each request's body read by DOCSHIFT_REQUEST_SECONDS from when its headers are
    in (gunicorn gives the headers its keepalive, 5 s)."""
    def by_deadline(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        length = environ.get("CONTENT_LENGTH")
        environ["wsgi.input"] = _Deadline(environ["wsgi.input"], app.config["DOCSHIFT"].request_seconds,
                                          int(length) if length and length.isdigit() else None)
        return wsgi_app(environ, start_response)
    return by_deadline


def healthz() -> ResponseReturnValue:
    """200 when the database, the object store, the worker and its LibreOffice answer; 503 otherwise.
    The report of each part comes with it for a request made on loopback directly, or one with the
    metrics token; others (a load balancer, anyone) get the status alone, from checks read at most
    once in HEALTH_READ_EVERY seconds, so a flood of them cannot flood the database and the store."""
    inside = metrics.from_inside()
    checks = _read_checks() if inside else _recent_checks()
    healthy = all(value == "ok" for name, value in checks.items() if name != "sandbox")
    answer: dict[str, Any] = {"status": "ok" if healthy else "unavailable"}
    if inside or metrics.token_given():
        answer["checks"] = checks
    return answer, 200 if healthy else 503


def _recent_checks() -> dict[str, str]:
    """The last checks if fresh enough, else new ones; while one request reads them, the others take
    the last ones (only the first request of a process waits), with the part being read reported as not
    answering once its check has taken HEALTH_STALLED seconds."""
    read_at, checks = current_app.extensions.get("docshift.health", (None, None))
    if read_at is not None and time.monotonic() - read_at < HEALTH_READ_EVERY:
        return dict(checks)
    if not _health_read.acquire(blocking=checks is None):
        checks = dict(checks)
        part = _checking  # the read in flight
        if part is not None and time.monotonic() - part[1] > HEALTH_STALLED:
            checks[part[0]] = f"not answering for {time.monotonic() - part[1]:.0f} s"
        return checks
    try:
        return _read_checks(track=True)
    finally:
        _health_read.release()


def _read_checks(track: bool = False) -> dict[str, str]:
    """Each part's state: ``engine`` says "failing: " and why when a worker's LibreOffice cannot
    start or its disk is full; ``sandbox`` says "off" while a worker runs LibreOffice without its
    sandbox (the operator's choice: not a failure)."""
    global _checking
    checks: dict[str, str] = {}
    if track:  # the shared read's progress, for the requests that do not wait for it
        _checking = ("database", time.monotonic())
    try:
        connection.ping(get_db())
        checks["database"] = "ok"
        beat = liveness.last_heartbeat(get_db())
        silence = get_settings().worker_silence_seconds
        fresh = beat is not None and (connection.now() - beat).total_seconds() < silence
        checks["worker"] = "ok" if fresh else "no recent heartbeat"
        checks["engine"], checks["sandbox"] = engine_checks(
            liveness.engine_reports(get_db(), connection.now() - timedelta(seconds=silence)))
    except Exception as error:
        checks["database"] = f"error: {type(error).__name__}"
        for name in ("worker", "engine", "sandbox"):
            checks.setdefault(name, "unknown")
    checks["disk"] = spool.short_of_room({"data": get_settings().data_dir}) or "ok"
    if track:
        _checking = ("object_store", time.monotonic())
    try:
        get_store().ping()
        checks["object_store"] = "ok"
    except Exception as error:
        checks["object_store"] = f"error: {type(error).__name__}"
    if track:
        _checking = None
    current_app.extensions["docshift.health"] = (time.monotonic(), checks)
    return dict(checks)


def engine_checks(reports: list[Row]) -> tuple[str, str]:
    """(engine, sandbox) for /healthz from the workers' recent reports."""
    if not reports:
        return "no report", "unknown"
    broken = [r["detail"] for r in reports if r["state"] == "broken"]
    if broken:  # what a worker says stops its conversions: a full disk, a LibreOffice that cannot start
        engine = "failing: " + "; ".join(detail or "unknown" for detail in broken)
    else:
        engine = "ok" if any(r["state"] == "ok" for r in reports) else "starting"
    return engine, "off" if any(r["sandbox"] == "off" for r in reports) else "ok"
