"""The docshift API as the client speaks it: requests with retries, problems and their hints,
idempotency keys, downloads. The library on top is ``library.py``, the command ``__init__.py``."""


import hashlib
import hmac
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests

from docshift.contract import ProblemCode, TaskErrorCode
from docshift.errors import ClientProblem as Problem
from docshift.formats import by_filename, target_name
from docshift.settings import HOUR, MIN_IDEMPOTENCY_KEY_TTL

DEFAULT_URL = "http://127.0.0.1:8000"
ATTEMPTS = 5            # per request: 0.5 + 1 + 2 + 4 s of backoff covers a service restart
BACKOFF = 0.5
TIMEOUT = (10, 60)      # (connect, read) seconds for one HTTP request

# The client's own codes, beside the service's problem codes
UNREACHABLE, UNEXPECTED_RESPONSE, DOWNLOAD_FAILED = "unreachable", "unexpected_response", "download_failed"
TIMED_OUT, INTERRUPTED, NO_RESULT = "timed_out", "interrupted", "no_result"
# The client runs without the service's settings: a limit comes from the service's own answer (a 413's
# detail names it), and how long a key replays is what the contract promises at least.
REPLAY_TIME = f"at least {MIN_IDEMPOTENCY_KEY_TTL // HOUR} h"
_T = TypeVar("_T")

# One short hint per problem code: what the user can do about it.
HINTS = {
    ProblemCode.MISSING_API_KEY: "Set DOCSHIFT_API_KEY to your key (dsk_...).",
    ProblemCode.INVALID_API_KEY: "Check DOCSHIFT_API_KEY.",
    ProblemCode.SUBSCRIPTION_PENDING_OR_INACTIVE: "Check the subscription with the marketplace or operator.",
    ProblemCode.TASK_NOT_FOUND: "Check the task id; a task is only visible to the account that submitted it.",
    ProblemCode.NOT_FOUND: f"Check DOCSHIFT_URL: it should be the service's base URL, e.g. {DEFAULT_URL}.",
    ProblemCode.METHOD_NOT_ALLOWED: "Check DOCSHIFT_URL: it should be the service's base URL.",
    ProblemCode.FILE_TOO_LARGE: "Save the file smaller, or split it, to stay within the service's limit.",
    ProblemCode.UNSUPPORTED_FILE_TYPE: "Only .doc, .xls and .ppt files are accepted.",
    ProblemCode.INVALID_REQUEST: "The service refused the request as malformed.",
    ProblemCode.IDEMPOTENCY_CONFLICT: "This file's Idempotency-Key was used for other content; rename it.",
    ProblemCode.TOO_MANY_TASKS: "The account has too many tasks in progress; wait for some to finish.",
    ProblemCode.SERVICE_UNAVAILABLE: "The service is temporarily unavailable; try again shortly.",
    ProblemCode.INTERNAL_ERROR: "The service failed; try again later or tell its operator.",
    UNREACHABLE: "Check DOCSHIFT_URL and that the service is running.",
    UNEXPECTED_RESPONSE: "Check DOCSHIFT_URL: it should point at a docshift service.",
    DOWNLOAD_FAILED: "Run the command again: a new query gives a new link while the result is kept.",
    TIMED_OUT: "The task goes on in the service; run the command again later to fetch its result.",
}
# One short hint per code of a FAILED task; a failure is never billed.
FAILURE_HINTS = {
    TaskErrorCode.UNSUPPORTED_CONTENT: "The file holds no document of its extension's type.",
    TaskErrorCode.ENCRYPTED_DOCUMENT: "It is protected: give its password with --password-file (lines "
                                      "'path<TAB>password') or DOCSHIFT_DOCUMENT_PASSWORD (API: Document-Password).",
    TaskErrorCode.WRONG_PASSWORD: "The password given for it does not open it; check --password-file or "
                                  "DOCSHIFT_DOCUMENT_PASSWORD.",
    TaskErrorCode.ENCRYPTION_UNSUPPORTED: "Its protection cannot be opened here; remove the password in Office.",
    TaskErrorCode.CONVERSION_FAILED: "The file may be damaged; open and save it again in Office.",
    TaskErrorCode.CONVERSION_TIMEOUT: "The file takes too long to convert; try saving it smaller.",
    TaskErrorCode.OUTPUT_INVALID: "The result lost content; tell the service's operator.",
    TaskErrorCode.SUBSCRIPTION_INACTIVE: "Check the subscription with the marketplace or operator.",
    TaskErrorCode.INPUT_MISSING: "The upload was lost before it was converted; rename the file to convert it again "
                                 f"(its Idempotency-Key replays this task for {REPLAY_TIME}).",
}
# Codes no other file or retry can fix: stop the whole run and exit 2.
CONFIG_CODES = {ProblemCode.MISSING_API_KEY, ProblemCode.INVALID_API_KEY, ProblemCode.SUBSCRIPTION_PENDING_OR_INACTIVE,
                ProblemCode.NOT_FOUND, ProblemCode.METHOD_NOT_ALLOWED, UNEXPECTED_RESPONSE}
TRANSIENT_CODES = {ProblemCode.SERVICE_UNAVAILABLE, ProblemCode.INTERNAL_ERROR, UNREACHABLE}


def problem_from(response: requests.Response) -> Problem:
    """The Problem an error answer names (problem+json), or what it looks like when it names none."""
    try:
        body = response.json()
        code, detail = body["code"], body.get("detail") or body.get("title") or ""
    except (ValueError, KeyError, TypeError, AttributeError):
        # not problem+json: a proxy, another server, or a wrong DOCSHIFT_URL
        code = UNEXPECTED_RESPONSE if response.status_code < 500 else ProblemCode.SERVICE_UNAVAILABLE
        detail = f"HTTP {response.status_code} from {urlsplit(response.url).netloc}."
    return Problem(str(code), str(detail), retry_after(response.headers))


def transient(problem: Problem) -> bool:
    return problem.code in TRANSIENT_CODES


def exit_code(problem: Problem) -> int:
    return 2 if problem.code in CONFIG_CODES else 1


def line(problem: Problem, context: object = None) -> str:
    """The problem as one line: its code, the service's detail, and a hint."""
    text = " ".join(part for part in (problem.detail.strip(), HINTS.get(problem.code, "")) if part)
    where = f"{context}: " if context else ""
    return " ".join(f"docshift: {where}{problem.code}: {text}".split())  # always a single line


def retry_after(headers: Mapping[str, str], default: float | None = None) -> float | None:
    try:
        return max(0.0, min(float(headers["Retry-After"]), 60.0))
    except (KeyError, ValueError):
        return default


def with_retries(action: Callable[[], _T], stop: threading.Event | None = None) -> _T:
    """Run ``action`` again, with exponential backoff, on 5xx answers and connection errors.

    Safe for submissions too: they carry an Idempotency-Key, so a retry never makes a second task.
    """
    for attempt in range(ATTEMPTS):
        try:
            return action()
        except (requests.ConnectionError, requests.Timeout,
                requests.exceptions.ChunkedEncodingError) as error:
            request: Any = error.request  # a PreparedRequest, whose url is text
            host = urlsplit(request.url).netloc if request is not None else "the service"
            last = Problem(UNREACHABLE, f"Cannot reach {host} ({type(error).__name__}).")
        except Problem as problem:
            if not transient(problem):
                raise
            last = problem
        if stop is not None and stop.is_set():
            break  # the run is being cancelled: no more attempts
        if attempt + 1 < ATTEMPTS:
            pause(last.retry_after if last.retry_after is not None else BACKOFF * 2 ** attempt, stop)
    raise last


def pause(seconds: float, stop: threading.Event | None) -> None:
    """Sleep, but wake at once when ``stop`` is set (Ctrl-C must not wait out a Retry-After)."""
    if stop is None:
        time.sleep(seconds)
    else:
        stop.wait(seconds)


class Api:
    """The service at ``url`` with ``key``: JSON calls with retries; the key never leaves ``auth``."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.auth = {"Authorization": f"Bearer {key}"}
        # keys the hash of a document password in an Idempotency-Key: without the API key, no guessing it from there
        self._tag_key = hmac.new(key.encode(), b"docshift client: document password tag", "sha256").digest()

    def options_tag(self, password: str | None, protection: str | None) -> str:
        """16 hex digits naming a Document-Password and protection, keyed; "" when neither is sent."""
        if password is None and protection is None:
            return ""
        sent = json.dumps([password, protection]).encode()
        return hmac.new(self._tag_key, sent, "sha256").hexdigest()[:16]

    def call(self, method: str, url: str, stop: threading.Event | None = None,
             headers: Mapping[str, str | bytes] | None = None, **kwargs: Any) -> tuple[Any, Mapping[str, str]]:
        """JSON body and headers of an API call; a Problem for any error answer.

        ``url`` is a path under DOCSHIFT_URL, or a URL the service gave (a ``status_url``), of
        which only the path is used: the key goes to the configured scheme, host and port only,
        whatever host a status_url names (a service without DOCSHIFT_BASE_URL builds it from the
        request's Host header).
        """
        if url.startswith(("http://", "https://")):
            given = urlsplit(url)
            url = self.origin + given.path + (f"?{given.query}" if given.query else "")
        else:
            url = self.url + url
        headers = {**self.auth, **(headers or {})}

        def once() -> tuple[Any, Mapping[str, str]]:
            # module-level requests call: a fresh connection per call, no Session shared by threads
            with requests.request(method, url, headers=headers, timeout=TIMEOUT,
                                  **kwargs) as response:
                if response.status_code >= 400:
                    raise problem_from(response)
                try:
                    return response.json(), response.headers
                except ValueError:
                    raise Problem(UNEXPECTED_RESPONSE, f"HTTP {response.status_code} without "
                                  f"JSON from {urlsplit(url).netloc}.") from None

        return with_retries(once, stop)


def utf8_name(name: str) -> str:
    """A file name as the service is told it and the run prints and reports it: its bytes that are no UTF-8 (a Linux
    name, held as surrogates) as U+FFFD, which the service, a terminal, the CSV and the page can all hold; the
    result is saved under the name's own bytes."""
    return name.encode(errors="surrogateescape").decode(errors="replace")


def idempotency_key(name: str, data: bytes, generation: int = 0, options: str = "") -> str:
    """Same content and relative path -> same key, so a rerun replays the original task for free.

    ``name`` is the file's path relative to the folder it was found in (its bare name when given
    alone), in POSIX form: two copies of one file in two folders are two results, and the service
    treats another name with the same key as a conflict. ``generation`` counts resubmissions of a
    source whose result expired before it was downloaded: the old key would replay the expired task.
    ``options`` is ``Api.options_tag`` of the password and protection sent: a file sent with another password is
    another task, the same one replays. 88 (+ 2 or more, + 18) printable ASCII characters, within the 8-128 rule.
    """
    named = hashlib.sha256(name.encode(errors="surrogateescape")).hexdigest()[:16]  # a name's bytes, UTF-8 or not
    key = f"sha256-{hashlib.sha256(data).hexdigest()}-{named}"
    key = f"{key}-r{generation}" if generation else key
    return f"{key}-p{options}" if options else key


def bare_name(name: str | None, source: str) -> str:
    """A file name the service gave (``result_filename``) reduced to a bare name: never a path out of --out."""
    name = PurePosixPath((name or "").replace("\\", "/")).name
    if name in ("", ".", ".."):
        name = target_name(PurePosixPath(source).name) or f"{PurePosixPath(source).stem}.out"
    return name


def local_name(result_filename: str | None, source: str) -> str:
    """The result's name beside its source under --out: the source's own name (``a/b.doc`` -> ``a/b.docx``) with
    the type the service gave the result (``.docm`` for a kept VBA project). Never the service's name, which it
    cleans: two local names (`` report.doc`` and ``report.doc``) could share it, one result writing over the other."""
    found = by_filename(source)
    extension = PurePosixPath(result_filename or "").suffix.lstrip(".").lower()
    types = {found.result(False).extension, found.result(True).extension} if found else set()
    return target_name(source, extension if extension in types else None) or bare_name(result_filename, source)


def fetch(url: str, target: Path, stop: threading.Event | None = None) -> Path:
    """Stream a presigned link into ``target``; plain GET, the link is the credential. The file appears
    under its name only when whole, and a stop mid-way leaves nothing behind."""
    def once() -> Path:
        with requests.get(url, stream=True, timeout=TIMEOUT) as response:
            if response.status_code >= 400:
                kind = ProblemCode.SERVICE_UNAVAILABLE if response.status_code >= 500 else DOWNLOAD_FAILED
                raise Problem(kind, f"The object store answered HTTP {response.status_code}.",
                              retry_after(response.headers))
            # named after the result, in a name of its own length: a result named as long as a name can be has room
            partial = target.with_name(f".{hashlib.sha256(os.fsencode(target.name)).hexdigest()[:20]}.part")
            try:
                with open(partial, "wb") as f:
                    for chunk in response.iter_content(1 << 16):
                        if stop is not None and stop.is_set():
                            raise Problem(INTERRUPTED, "Stopped before the download ended.")
                        f.write(chunk)
                os.replace(partial, target)  # a reader never sees half a file under the real name
            finally:
                partial.unlink(missing_ok=True)
            return target
    return with_retries(once, stop)


# "... at most 2 MiB (2,097,152 bytes)." or "at most 1,000 bytes.": how the OpenAPI document states the limit
STATED_LIMIT = re.compile(r"at most ((?:\d+ MiB \()?([\d,]+) bytes\)?)")


def upload_limit(api: Api) -> tuple[int, str] | None:
    """The largest file the service takes, and how it states it, from its public OpenAPI document
    (the client has no settings of the service's): its ``x-max-bytes``, in the words of its
    description; None when the document does not say."""
    try:
        document, _ = api.call("GET", "/v1/openapi.json")
        post = document["paths"]["/v1/conversions"]["post"]
        part = post["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]["file"]
        limit, found = part.get("x-max-bytes"), STATED_LIMIT.search(part.get("description", ""))
    except (Problem, KeyError, TypeError, AttributeError):
        return None
    if type(limit) is not int:  # a service older than the field: its words alone
        return (int(found.group(2).replace(",", "")), found.group(1)) if found else None
    return limit, found.group(1) if found and int(found.group(2).replace(",", "")) == limit else f"{limit:,} bytes"
