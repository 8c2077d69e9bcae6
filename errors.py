"""The API's errors: one class per documented code, rendered as problem+json (RFC 9457).

Handlers log the cause and return a safe message: never a stack trace, never a key.
"""

import logging
import sqlite3

from flask import jsonify, request
from minio.error import MinioException
from urllib3.exceptions import HTTPError as Urllib3Error
from werkzeug.exceptions import HTTPException

log = logging.getLogger("docshift")


class ApiError(Exception):
    status = 500
    code = "internal_error"
    title = "Internal error"
    headers = {}

    def __init__(self, detail=None):
        super().__init__(detail or self.title)
        self.detail = detail or self.title


class MissingApiKey(ApiError):
    status, code, title = 401, "missing_api_key", "Missing API key"
    headers = {"WWW-Authenticate": 'Bearer realm="docshift"'}


class InvalidApiKey(ApiError):
    status, code, title = 401, "invalid_api_key", "Invalid API key"
    headers = {"WWW-Authenticate": 'Bearer realm="docshift", error="invalid_token"'}


class SubscriptionInactive(ApiError):
    status, code, title = 403, "subscription_pending_or_inactive", "Subscription pending or inactive"


class TaskNotFound(ApiError):
    status, code, title = 404, "task_not_found", "Task not found"


class NotFound(ApiError):
    status, code, title = 404, "not_found", "Not found"


class MethodNotAllowed(ApiError):
    status, code, title = 405, "method_not_allowed", "Method not allowed"


class IdempotencyConflict(ApiError):
    status, code, title = 422, "idempotency_conflict", "Idempotency-Key reused with another payload"


class FileTooLarge(ApiError):
    status, code, title = 413, "file_too_large", "File too large"


class UnsupportedFileType(ApiError):
    status, code, title = 415, "unsupported_file_type", "Unsupported file type"


class InvalidRequest(ApiError):
    status, code, title = 400, "invalid_request", "Invalid request"


class ServiceUnavailable(ApiError):
    status, code, title = 503, "service_unavailable", "Service unavailable"


try:  # gunicorn raises these while the app reads a malformed or cut-off body
    from gunicorn.http.errors import NoMoreData, ParseException
    BROKEN_BODY = (ParseException, NoMoreData)
except ImportError:  # another WSGI server
    BROKEN_BODY = ()

# a dependency that does not answer: the client should retry, whichever view it was
UNAVAILABLE = {sqlite3.OperationalError: "The database is not answering; retry shortly.",
               MinioException: "The object store is not answering; retry shortly.",
               Urllib3Error: "The object store is not answering; retry shortly."}

# werkzeug's own errors (routing, body limits) mapped onto ours
_BY_STATUS = {400: InvalidRequest, 404: NotFound, 405: MethodNotAllowed, 413: FileTooLarge,
              415: UnsupportedFileType}


def problem(error):
    body = {"type": f"/problems/{error.code}", "title": error.title, "status": error.status,
            "detail": error.detail, "code": error.code}
    response = jsonify(body)
    response.status_code = error.status
    response.content_type = "application/problem+json"
    response.headers.update(error.headers)
    return response


def register(app):
    @app.errorhandler(ApiError)
    def api_error(error):
        if error.status >= 500:
            log.error("%s %s: %s", request.method, request.path, error.detail)
        return problem(error)

    @app.errorhandler(HTTPException)
    def http_error(error):
        kind = _BY_STATUS.get(error.code)
        if kind is None:
            generic = ApiError(error.description)
            generic.status, generic.title = error.code, error.name
            generic.code = error.name.lower().replace(" ", "_")
            return problem(generic)
        detail = {
            404: "No such endpoint.",
            405: f"{request.method} is not allowed here.",
            413: "The file is larger than the 4 MiB (4,194,304 bytes) limit.",
        }.get(error.code, error.description)
        response = problem(kind(detail))
        if error.code == 405 and getattr(error, "valid_methods", None):
            response.headers["Allow"] = ", ".join(error.valid_methods)
        return response

    @app.errorhandler(Exception)
    def unexpected(error):
        for kind, detail in UNAVAILABLE.items():
            if isinstance(error, kind):
                log.warning("%s %s: %r", request.method, request.path, error)
                return problem(ServiceUnavailable(detail))
        if isinstance(error, BROKEN_BODY):
            log.info("malformed request body on %s %s: %r", request.method, request.path, error)
            return problem(InvalidRequest("The request body is malformed or was cut off."))
        log.exception("unhandled error on %s %s", request.method, request.path)
        return problem(ApiError("The server failed to handle this request; it has been logged."))
