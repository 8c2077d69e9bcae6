"""gunicorn's gevent worker, with gunicorn's own refusals in problem+json, and gunicorn's log in JSON lines.

A request that gunicorn's HTTP parser refuses never reaches the app: a request line or headers past gunicorn's
limits, a header value with a line break or a control byte in it, a Content-Length that is no number, a broken
chunk. gunicorn answers those with an HTML page, and logs the refused bytes with them, which may be the tail of a
``Document-Password`` or an API key that a client split across lines. Here they are 400 ``invalid_request`` as
problem+json, as the app answers every error, and the log names the kind of refusal, never what was sent. So is
a request that repeats a header the API reads as one value (``SINGLE``), which WSGI would hand the app joined.

``gunicorn_conf`` names these classes; gunicorn's master imports them before it forks, as it imports its own
gevent worker: nothing of the app is imported here.
"""

import json
from collections import Counter
from typing import Any

from gunicorn import glogging, util
from gunicorn.http import errors
from gunicorn.workers.ggevent import GeventWorker

from docshift.contract import problem_document
from docshift.errors import ApiError, InvalidRequest
from docshift.logs import JsonFormatter

# the service's faults among gunicorn's parse errors: a header the app answered with that HTTP does not allow (a
# subclass of the refusal of a request's header, which newer gunicorns tell apart), its configuration
OURS = tuple(getattr(errors, name) for name in ("InvalidResponseHeader", "InvalidResponseHeaderName",
                                                 "ConfigurationProblem") if hasattr(errors, name))
# what each refusal tells the client; {...} are gunicorn's settings. The first class that matches answers.
REFUSALS: tuple[tuple[type[Exception] | tuple[type[Exception], ...], str], ...] = (
    (OURS, ""),
    (errors.LimitRequestLine, "The request line is over {limit_request_line} bytes."),
    (errors.LimitRequestHeaders, "The request has more than {limit_request_fields} header fields, or one over "
                                 "{limit_request_field_size} bytes."),
    ((errors.InvalidHeader, errors.InvalidHeaderName, errors.ObsoleteFolding),
     "A header field is malformed: its name, or a value holding a line break or a control character (a header "
     "value is one line of visible characters), or a Content-Length that is no number."),
    ((errors.UnsupportedTransferCoding, errors.InvalidChunkSize, errors.ChunkMissingTerminator,
      errors.InvalidChunkExtension), "The body's Transfer-Encoding or its chunks are malformed."),
    (errors.ExpectationFailed, "Of Expect, only 100-continue is understood."),
    (errors.ParseException, "The request is not well-formed HTTP/1.1."),
)


def refusal(error: BaseException, settings: Any) -> str | None:
    """What the client is told of ``error``, gunicorn's refusal of its request; None when the fault is the
    service's (an answer gunicorn could not send, its configuration, anything that is no refusal)."""
    for kinds, detail in REFUSALS:
        if isinstance(error, kinds):
            return detail.format(limit_request_line=settings.limit_request_line,
                                 limit_request_fields=settings.limit_request_fields,
                                 limit_request_field_size=settings.limit_request_field_size) or None
    return None


def answer(error: ApiError, status: int) -> bytes:
    """The whole HTTP/1.1 answer: ``error`` as problem+json, and the connection closed (its framing is unknown)."""
    body = json.dumps(problem_document(error.code, error.title, status, error.detail)).encode()
    return (f"HTTP/1.1 {status} {error.title}\r\nConnection: close\r\nContent-Type: application/problem+json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body


# the headers the API reads as one value each. WSGI joins a repeated header's values with commas, which a password or
# an idempotency key may hold: two Document-Password headers of the right password were one wrong one
SINGLE = frozenset({"AUTHORIZATION", "CONTENT-TYPE", "DOCUMENT-PASSWORD", "IDEMPOTENCY-KEY"})


def repeated(headers: list[tuple[str, str]]) -> list[str]:
    """Those of ``SINGLE`` that ``headers`` (gunicorn's list of a request's, in order) hold more than once."""
    counted = Counter(name.upper() for name, _ in headers)
    return sorted(name for name in SINGLE if counted[name] > 1)


class ProblemWorker(GeventWorker):
    """gunicorn's gevent worker, answering what its parser refuses as the API answers errors, and refusing a
    request that repeats a header the API reads as one value, before the app sees it joined."""

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
        if twice := repeated(req.headers):
            raise InvalidRequest(f"Send each of these headers once: {', '.join(name.title() for name in twice)}.")
        return super().handle_request(listener_name, req, sock, addr)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        detail = exc.detail if isinstance(exc, InvalidRequest) else refusal(exc, self.cfg)
        if detail is None:
            self.log.exception("Error handling request")
            reply = answer(ApiError(), 500)
        else:
            self.log.warning("Refused a malformed request from %s: %s", (addr or ("",))[0], type(exc).__name__)
            reply = answer(InvalidRequest(detail), 400)
        try:
            util.write_nonblock(client, reply)
        except Exception:  # the client has gone
            self.log.debug("Failed to send error message.")


class JsonLogger(glogging.Logger):
    """gunicorn's error log (its start, its workers' deaths and timeouts, the refusals above) as the JSON lines
    every docshift process writes; its access log stays off (a request's query string is never logged)."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(JsonFormatter())
