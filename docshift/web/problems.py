"""problem+json (RFC 9457) for every error a view raises or werkzeug reports.

The handlers log the cause and return a safe message: never a stack trace, never a key.
"""

import logging

from flask import jsonify, request
from werkzeug.exceptions import HTTPException

from docshift.errors import (
    ApiError,
    DatabaseUnavailable,
    FileTooLarge,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    ServiceUnavailable,
    StorageUnavailable,
    UnsupportedFileType,
)

log = logging.getLogger("docshift")

try:  # gunicorn raises these while the app reads a malformed or cut-off body
    from gunicorn.http.errors import NoMoreData, ParseException
    BROKEN_BODY = (ParseException, NoMoreData)
except ImportError:  # another WSGI server
    BROKEN_BODY = ()
# the socket's read timeout (READ_TIMEOUT) while the app reads a body that stopped coming;
# the store and the database report their own timeouts as StorageUnavailable
BROKEN_BODY += (TimeoutError,)

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

    @app.errorhandler(StorageUnavailable)
    def unavailable(error):
        # a dependency that does not answer: the client should retry, whichever view it was
        log.warning("%s %s: %r", request.method, request.path, error)
        part = "database" if isinstance(error, DatabaseUnavailable) else "object store"
        return problem(ServiceUnavailable(f"The {part} is not answering; retry shortly.",
                                          headers={"Retry-After": "5"}))

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
        if isinstance(error, BROKEN_BODY):
            log.info("malformed request body on %s %s: %r", request.method, request.path, error)
            return problem(InvalidRequest("The request body is malformed or was cut off."))
        log.exception("unhandled error on %s %s", request.method, request.path)
        return problem(ApiError("The server failed to handle this request; it has been logged."))
