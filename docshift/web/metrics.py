"""Request ids, structured logs and Prometheus metrics.

Logs are JSON lines with the request id (``X-Request-Id``, taken from a proxy or
made here, and echoed in the response). No query string is logged: a
registration link's token would otherwise sit in the log. Keys and file
content are never logged.

``/metrics`` serves HTTP latency from every gunicorn worker (prometheus_client's
multiprocess mode, files under the data dir) and, read from the database at
scrape time so that they are exact across processes (and kept a few seconds, since
they aggregate whole tables): tasks by type and state, queue depth, conversion
seconds and LibreOffice restarts. With ``DOCSHIFT_METRICS_TOKEN`` set it asks every request
for the token, whatever address the web listens on; without one it answers only a request made
on loopback directly (``from_inside``), never one a proxy passed on. Beyond loopback, the web
starts only with its token set (``docshift.gunicorn_conf``).
"""

import fcntl
import ipaddress
import json
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flask import Flask, Response, g, request

from docshift import logs
from docshift.errors import NotFound
from docshift.storage import liveness
from docshift.web.context import get_db, get_settings

REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# gunicorn accepts any upper-case token as a method: labels must not grow with them
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
FIGURES_FILE = "metrics-figures.json"  # the task figures every web process serves, in the data dir
# what a reverse proxy adds to the requests it passes on (nginx, Caddy, Traefik, Apache, HAProxy)
FORWARDING = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-IP")


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            record.request_id = g.get("request_id")
        except RuntimeError:  # outside a request
            record.request_id = None
        return True


def init_app(app: Flask) -> None:
    logs.configure(RequestIdFilter())
    _metrics_dir(app)
    app.before_request(_start)
    app.after_request(_finish)
    app.add_url_rule("/metrics", view_func=metrics)


def _metrics_dir(app: Flask) -> None:
    """Where the gunicorn workers write their HTTP metrics (``make run`` empties it at start);
    set before prometheus_client is first imported, which reads it then."""
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(Path(app.config["DOCSHIFT"].data_dir) / "metrics"))
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)


_latency: Any = None  # prometheus_client's Histogram, made on first use
_latency_made = threading.Lock()
# the room prometheus_client's file of this process is given at once: a few hundred label sets (its own start
# is 64 KB, which it doubles as it fills)
METRICS_FILE_BYTES = 1 << 20


def latency() -> Any:
    """The HTTP latency histogram, made on first use (after the multiprocess dir is set); the
    lock matters: two requests of one worker both making it is a DuplicateTimeseries."""
    global _latency
    with _latency_made:
        if _latency is None:
            _reserve(Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]) / f"histogram_{os.getpid()}.db")
            from prometheus_client import Histogram

            _latency = Histogram("docshift_http_request_duration_seconds", "HTTP request latency",
                                 ["method", "endpoint", "status"],
                                 buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
    return _latency


def _reserve(path: Path) -> None:
    """Give the file prometheus_client will map for this process's histogram its blocks now. It maps a sparse
    file and writes into it: on a full disk the first write to a page had no block to land on, and the kernel
    killed the gunicorn worker with SIGBUS, before it answered; each worker started again died the same way.
    Reserved here, a full disk is an OSError, which ``_finish`` logs, and the request is answered."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_size < METRICS_FILE_BYTES:
            os.posix_fallocate(fd, 0, METRICS_FILE_BYTES)
    finally:
        os.close(fd)


def _start() -> None:
    given = request.headers.get("X-Request-Id", "")
    g.request_id = given if REQUEST_ID.fullmatch(given) else secrets.token_hex(8)
    g.started = time.perf_counter()


def _finish(response: Response) -> Response:
    elapsed = time.perf_counter() - g.get("started", time.perf_counter())
    response.headers["X-Request-Id"] = g.get("request_id", "")
    endpoint = request.url_rule.rule if request.url_rule else "unmatched"
    method = request.method if request.method in METHODS else "OTHER"
    try:
        latency().labels(method, endpoint, str(response.status_code)).observe(elapsed)
    except OSError as error:  # the disk is full: the request is answered all the same
        logging.getLogger("docshift.metrics").warning("HTTP latency not recorded: %s", error.strerror or error)
    except Exception:  # a metric must never turn an answered request (a 202 even) into a 500
        logging.getLogger("docshift.metrics").exception("HTTP latency not recorded")
    logging.getLogger("docshift.access").info(
        "%s %s %s %.1f ms", request.method, request.path, response.status_code, elapsed * 1000)
    return response


def from_inside() -> bool:
    """Whether the request was made on this machine directly: from loopback (or a Unix socket), and not
    passed on by a proxy, whose own connection comes from loopback too."""
    if any(name in request.headers for name in FORWARDING):
        return False
    sock = request.environ.get("gunicorn.socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        return True
    try:
        peer = ipaddress.ip_address(request.remote_addr or "")
    except ValueError:
        return False
    if isinstance(peer, ipaddress.IPv6Address) and peer.ipv4_mapped:
        peer = peer.ipv4_mapped
    return peer.is_loopback


def token_given() -> bool:
    """Whether DOCSHIFT_METRICS_TOKEN is set and the request carries it as its Bearer."""
    token = get_settings().metrics_token
    # compared as bytes: compare_digest refuses non-ASCII str, and a header may carry any byte
    given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
    return bool(token) and secrets.compare_digest(given, f"Bearer {token}".encode())


def metrics() -> Response:
    """Prometheus exposition; with DOCSHIFT_METRICS_TOKEN set, only for that Bearer token, from
    anywhere; without, only for a request made on loopback directly."""
    if not (token_given() if get_settings().metrics_token else from_inside()):
        raise NotFound("No such endpoint.")
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(DatabaseCollector(_figures()))
    return Response(generate_latest(registry), mimetype="text/plain; version=0.0.4")


def _figures() -> dict[str, Any]:
    """The database's task figures, read at most once per METRICS_CACHE_SECONDS by all the web processes together:
    they aggregate whole tables, and scrapes may come as often as anyone likes. One snapshot serves every process (a
    file in the data dir, replaced under a lock): each process's own copy, made a few seconds from another's, gave
    a scrape a counter lower than the scrape before, which Prometheus takes for a restart of the counter."""
    path = Path(get_settings().data_dir) / FIGURES_FILE
    snapshot = _snapshot(path)
    if snapshot is None:
        with open(path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one process reads the tables; the others wait, then take its figures
            snapshot = _snapshot(path)
            if snapshot is None:
                figures = liveness.task_metrics(get_db(), BUCKETS)
                snapshot = {"at": time.time(), "figures": {
                    **figures, "tasks": [[kind, status, n] for (kind, status), n in figures["tasks"].items()]}}
                written = path.with_suffix(f".{os.getpid()}")
                written.write_text(json.dumps(snapshot))
                os.replace(written, path)
    figures = snapshot["figures"]
    return {**figures, "tasks": {(kind, status): n for kind, status, n in figures["tasks"]}}


def _snapshot(path: Path) -> dict[str, Any] | None:
    """The figures' snapshot at ``path`` while it is fresh (younger than METRICS_CACHE_SECONDS), else None."""
    try:
        snapshot = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet, or unreadable: read the tables again
        return None
    fresh = isinstance(snapshot, dict) and isinstance(snapshot.get("at"), (int, float)) and \
        time.time() - snapshot["at"] < get_settings().metrics_cache_seconds
    return snapshot if fresh else None


class DatabaseCollector:
    """Task metrics from the shared database, exact whichever process did the work."""

    def __init__(self, figures: dict[str, Any]) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        figures = self.figures
        tasks = GaugeMetricFamily("docshift_tasks", "Tasks by source type and state", labels=["type", "state"])
        for (kind, status), count in figures["tasks"].items():
            tasks.add_metric([kind, status], count)
        yield tasks
        yield GaugeMetricFamily("docshift_queue_depth", "Tasks waiting for a worker", value=figures["queued"])
        seconds = figures["conversion_seconds"]
        yield HistogramMetricFamily("docshift_conversion_seconds", "Seconds from claim to final state",
                                    buckets=seconds["buckets"], sum_value=seconds["sum"])
        restarts = CounterMetricFamily("docshift_libreoffice_restarts", "LibreOffice processes replaced "
                                       "(recycling, crashes, timeouts)")
        restarts.add_metric([], figures["libreoffice_restarts"])
        yield restarts
        stopped = CounterMetricFamily("docshift_runs_stopped", "Runs stopped and queued again, with no attempt used, "
                                      "so that another account's waiting file took their slot")
        stopped.add_metric([], figures["runs_stopped"])
        yield stopped
