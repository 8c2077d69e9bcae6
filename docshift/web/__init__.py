"""docshift's web app: API v1, the marketplace registration page, health, metrics, docs,
and the operator CLI."""

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from flask import Flask, request
from flask.typing import ResponseReturnValue

from docshift import settings
from docshift.storage import connection, liveness
from docshift.storage.connection import Row
from docshift.web import api, cli, metrics, openapi, problems, registration
from docshift.web.context import close_db, get_db, get_settings, get_store
from docshift.web.forms import DocshiftRequest


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The app, configured by ``settings.load(config)``: defaults, the environment, then ``config``
    (whose keys that name no setting, like ``TESTING``, are Flask's own). The settings are
    ``app.config["DOCSHIFT"]`` (``context.get_settings()``)."""
    app = Flask(__name__)
    app.request_class = DocshiftRequest
    given = dict(config or {})
    flask_own = {key: given.pop(key) for key in list(given) if key.lower() not in settings.NAMES}
    app.config.update(flask_own)
    app.config["DOCSHIFT"] = configured = settings.load(given)
    # werkzeug refuses bigger bodies before reading them; the slack is for multipart framing
    app.config["MAX_CONTENT_LENGTH"] = configured.max_upload_bytes + 64 * 1024
    app.config["MAX_FORM_PARTS"] = 16
    app.json.sort_keys = False  # type: ignore[attr-defined]  # Flask's default provider has it
    # "/v1/conversions//x" must not be redirected to another path
    app.url_map.merge_slashes = False
    metrics.init_app(app)
    app.before_request(_bound_body_reads)

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


def healthz() -> ResponseReturnValue:
    """200 when the database, the object store, the worker and its LibreOffice answer; 503 with
    the report otherwise (``engine`` then says "failing: " and why: a LibreOffice that cannot
    start, a full disk). ``sandbox`` says "off" while a worker runs LibreOffice without its
    sandbox (the operator's choice: not a failure)."""
    checks: dict[str, str] = {}
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
    try:
        get_store().ping()
        checks["object_store"] = "ok"
    except Exception as error:
        checks["object_store"] = f"error: {type(error).__name__}"
    healthy = all(value == "ok" for name, value in checks.items() if name != "sandbox")
    return {"status": "ok" if healthy else "unavailable", "checks": checks}, 200 if healthy else 503


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
