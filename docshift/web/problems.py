"""problem+json (RFC 9457) for every error a view raises or werkzeug reports.

The handlers log the cause and return a safe message: never a stack trace, never a key.
"""

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException, SecurityError

from docshift.contract import ProblemCode, problem_document
from docshift.errors import (
    ApiError,
    DatabaseUnavailable,
    FileTooLarge,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    ServiceUnavailable,
    SpoolFull,
    StorageUnavailable,
    UnsupportedFileType,
)
from docshift.settings import MIB
from docshift.web.context import get_settings

log = logging.getLogger("docshift")

try:  # gunicorn raises these while the app reads a malformed or cut-off body
    from gunicorn.http.errors import NoMoreData, ParseException
    BROKEN_BODY: tuple[type[Exception], ...] = (ParseException, NoMoreData)
except ImportError:  # another WSGI server
    BROKEN_BODY = ()
# the socket's read timeout (READ_TIMEOUT) while the app reads a body that stopped coming;
# the store and the database report their own timeouts as StorageUnavailable
BROKEN_BODY += (TimeoutError,)
BROKEN = "The request body is malformed or was cut off."


# the HTTP status of each problem code: the one place that maps the API's errors onto HTTP
STATUS = {
    ProblemCode.INVALID_REQUEST: 400,
    ProblemCode.MISSING_API_KEY: 401,
    ProblemCode.INVALID_API_KEY: 401,
    ProblemCode.SUBSCRIPTION_PENDING_OR_INACTIVE: 403,
    ProblemCode.TASK_NOT_FOUND: 404,
    ProblemCode.NOT_FOUND: 404,
    ProblemCode.METHOD_NOT_ALLOWED: 405,
    ProblemCode.FILE_TOO_LARGE: 413,
    ProblemCode.UNSUPPORTED_FILE_TYPE: 415,
    ProblemCode.IDEMPOTENCY_CONFLICT: 422,
    ProblemCode.TOO_MANY_TASKS: 429,
    ProblemCode.INTERNAL_ERROR: 500,
    ProblemCode.SERVICE_UNAVAILABLE: 503,
}
HEADERS = {
    ProblemCode.MISSING_API_KEY: {"WWW-Authenticate": 'Bearer realm="docshift"'},
    ProblemCode.INVALID_API_KEY: {"WWW-Authenticate": 'Bearer realm="docshift", error="invalid_token"'},
}
# werkzeug's own errors (routing, body limits) mapped onto ours
_BY_STATUS = {400: InvalidRequest, 404: NotFound, 405: MethodNotAllowed, 413: FileTooLarge,
              415: UnsupportedFileType}


def problem(error: ApiError) -> Response:
    """The problem+json answer to an ApiError."""
    return _answer(error.code, error.title, STATUS[error.code], error.detail, {**HEADERS.get(error.code, {}),
                                                                                 **error.headers})


def _answer(code: str, title: str, status: int, detail: str | None, headers: Mapping[str, str]) -> Response:
    response = jsonify(problem_document(code, title, status, detail))
    response.status_code = status
    response.content_type = "application/problem+json"
    response.headers.update(headers)
    return response


def upload_limit(limit: int) -> str:
    """``limit`` bytes as the API's messages and document state it: "2 MiB (2,097,152 bytes)"."""
    mib, rest = divmod(limit, MIB)
    return f"{mib} MiB ({limit:,} bytes)" if mib and not rest else f"{limit:,} bytes"


def register(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def api_error(error: ApiError) -> Response:
        if STATUS[error.code] >= 500:
            log.error("%s %s: %s", request.method, request.path, error.detail)
        return problem(error)

    @app.errorhandler(StorageUnavailable)
    def unavailable(error: StorageUnavailable) -> Response:
        # a dependency that does not answer: the client should retry, whichever view it was
        log.warning("%s %s: %r", request.method, request.path, error)
        if isinstance(error, SpoolFull):  # nothing was kept: the same request is welcome once there is room
            return problem(ServiceUnavailable("The service has no room to keep this file right now; retry later.",
                                              headers={"Retry-After": "30"}))
        part = "database" if isinstance(error, DatabaseUnavailable) else "object store"
        return problem(ServiceUnavailable(f"The {part} is not answering; retry shortly.",
                                          headers={"Retry-After": "5"}))

    @app.errorhandler(HTTPException)
    def http_error(error: Any) -> Response:  # an HTTPException: every one werkzeug raises has its code
        if isinstance(error, SecurityError):  # a Host that is none of TRUSTED_HOSTS
            log.info("%s %s: a Host header of no host of this service", request.method, request.path)
            return problem(InvalidRequest("The Host header names no host of this service; use the address "
                                          "its operator gave."))
        kind = _BY_STATUS.get(error.code)
        if kind is None:  # an HTTP error no view raises: werkzeug's name for it is the code
            return _answer(error.name.lower().replace(" ", "_"), error.name, error.code, error.description, {})
        detail = {
            404: "No such endpoint.",
            405: f"{request.method} is not allowed here.",
            413: f"The file is larger than the {upload_limit(get_settings().max_upload_bytes)} limit.",
        }.get(error.code, error.description)
        response = problem(kind(detail))
        if error.code == 405 and getattr(error, "valid_methods", None):
            response.headers["Allow"] = ", ".join(error.valid_methods)
        return response

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> Response:
        if isinstance(error, BROKEN_BODY):
            log.info("malformed request body on %s %s: %r", request.method, request.path, error)
            return problem(InvalidRequest(BROKEN))
        log.exception("unhandled error on %s %s", request.method, request.path)
        return problem(ApiError("The server failed to handle this request; it has been logged."))
